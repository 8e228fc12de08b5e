"""Fixtures of the persistence gate checks (not a test module).

``PersistenceWorld`` seeds, through the ordinary repositories and an admin unit of work, the
same kind of graph for three owners: alice and bob share tenant-a, mallory is in
tenant-b with the same principal name as alice (so a tenant check that only compared
principal ids would leak). Each owner gets a schedule with two revisions, one
materialized occurrence (session, events, run, checkpoint) and one missed, an
idempotency key and a process event.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.records import (
    AgentVersionRecord,
    IdempotencyEntry,
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunRecord,
    RunStatus,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.testing import PostgresUnitOfWorkFactory, metadata, to_asyncpg_url

T0 = datetime(2026, 4, 1, 9, 0, tzinfo=UTC)
AGENT_ID = UUID("9d7c2b1e-0a4f-4c3e-8b6d-5e4f3a2b1c0d")
ALICE = Principal("tenant-a", "alice", frozenset({"schedule.read", "schedule.write"}))
BOB = Principal("tenant-a", "bob", frozenset({"schedule.read", "schedule.write"}))
MALLORY = Principal("tenant-b", "alice", frozenset({"schedule.read", "schedule.write"}))
OWNERS = (ALICE, BOB, MALLORY)

# Tables every owner has rows in after ``PersistenceWorld.seed``.
OWNED_TABLES = (
    "schedules",
    "schedule_revisions",
    "schedule_occurrences",
    "schedule_idempotency_keys",
    "sessions",
    "session_events",
    "runs",
    "run_checkpoints",
    "process_events",
    "principals",
)


@dataclass
class Owned:
    """The ids seeded for one owner."""

    schedule: Schedule
    revision: ScheduleRevision
    session: SessionRecord
    run: RunRecord
    materialized: ScheduleOccurrence
    missed: ScheduleOccurrence
    marker: str


@dataclass
class PersistenceWorld:
    """Deterministic ids and the rows seeded per owner."""

    counter: int = 0
    owned: dict[tuple[str, str], Owned] = field(default_factory=dict)

    def uuid(self) -> UUID:
        self.counter += 1
        return UUID(int=(0x6A7E << 112) | self.counter)

    def of(self, principal: Principal) -> Owned:
        return self.owned[(principal.tenant_id, principal.principal_id)]

    def revision(self, schedule_id: UUID, number: int, owner: Principal) -> ScheduleRevision:
        return ScheduleRevision(
            schedule_id=schedule_id,
            revision=number,
            title=f"Digest {number}",
            instruction=f"Summarize the news for {owner.principal_id}.",
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            policy_profile="default",
            requested_scopes=frozenset({"schedule.read"}),
            limits=RunLimits(
                max_steps=8, max_model_calls=4, max_tool_calls=4, max_cost=Decimal("0.75")
            ),
            run_timeout_seconds=900,
            cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "America/New_York"},
            misfire_grace_seconds=600,
            max_consecutive_failures=3,
            created_by_principal_id=owner.principal_id,
            created_at=T0 - timedelta(days=3),
        )

    async def seed(self, uow: UnitOfWork) -> None:
        """Write the agent version and every owner's graph (the caller commits)."""
        await uow.agents.put_version(
            AgentVersionRecord(
                agent_id=AGENT_ID,
                version="1.0.0",
                policy_profile="default",
                spec={"tools": []},
                limits={},
                content_hash="sha256:agent",
                created_at=T0 - timedelta(days=9),
            )
        )
        for owner in OWNERS:
            await self._seed_owner(uow, owner)

    def build_owner(self, owner: Principal) -> Owned:
        """One owner's values (nothing is written): a schedule at revision 2, its
        revisions, a materialized occurrence with session and run, a missed one."""
        sid = self.uuid()
        schedule = Schedule(
            id=sid,
            tenant_id=owner.tenant_id,
            principal_id=owner.principal_id,
            state=ScheduleState.ACTIVE,
            pause_reason=None,
            current_revision=2,
            next_fire_at=T0 + timedelta(days=1),
            consecutive_failures=0,
            created_at=T0 - timedelta(days=3),
            updated_at=T0,
        )
        session = SessionRecord(
            id=self.uuid(),
            tenant_id=owner.tenant_id,
            principal_id=owner.principal_id,
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            metadata={"schedule_id": str(sid), "schedule_revision": 2},
            created_at=T0,
            updated_at=T0,
        )
        run = RunRecord(
            id=self.uuid(),
            tenant_id=owner.tenant_id,
            principal_id=owner.principal_id,
            session_id=session.id,
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            policy_profile="default",
            status=RunStatus.COMPLETED,
            priority=10,
            scheduled_for=T0,
            requested_scopes=frozenset({"schedule.read"}),
            limits={"max_steps": 8},
            created_at=T0,
            updated_at=T0,
            deadline_at=T0 + timedelta(minutes=15),
            usage={"steps": 3},
            cost=Decimal("0.10"),
        )
        materialized = ScheduleOccurrence(
            id=self.uuid(),
            schedule_id=sid,
            schedule_revision=2,
            nominal_fire_at=T0,
            disposition=OccurrenceDisposition.MATERIALIZED,
            session_id=session.id,
            run_id=run.id,
            reason_code=None,
            authority_version="av-7",
            materialized_at=T0,
            links_erased_at=None,
            created_at=T0,
        )
        missed = ScheduleOccurrence(
            id=self.uuid(),
            schedule_id=sid,
            schedule_revision=1,
            nominal_fire_at=T0 - timedelta(days=1),
            disposition=OccurrenceDisposition.MISSED,
            session_id=None,
            run_id=None,
            reason_code="schedule.occurrence.missed_grace",
            authority_version=None,
            materialized_at=None,
            links_erased_at=None,
            created_at=T0 - timedelta(days=1),
        )
        marker = f"erasable-content-{secrets.token_hex(6)}"
        return Owned(
            schedule, self.revision(sid, 2, owner), session, run, materialized, missed, marker
        )

    async def _seed_owner(self, uow: UnitOfWork, owner: Principal) -> None:
        o = self.build_owner(owner)
        sid = o.schedule.id
        await uow.principals.put(
            PrincipalRecord(owner.tenant_id, owner.principal_id, True, owner.scopes, {}, T0, T0)
        )
        first = o.schedule.model_copy(update={"current_revision": 1})
        await uow.schedules.create(first, self.revision(sid, 1, owner))
        await uow.schedules.mutate(
            ScheduleCommand(expected=first, updated=o.schedule, revision=o.revision)
        )
        await uow.occurrences.insert(o.materialized)
        await uow.occurrences.insert(o.missed)
        await uow.sessions.create(o.session)
        await uow.sessions.append_event(
            SessionEvent(o.session.id, 1, "session.created", "scheduler", {}, T0)
        )
        await uow.sessions.append_event(
            SessionEvent(o.session.id, 2, "message.assistant", "agent", {"text": o.marker}, T0)
        )
        await uow.runs.create(o.run)
        await uow.runs.add_checkpoint(RunCheckpoint(o.run.id, 0, 0, {"note": o.marker}, T0))
        await uow.idempotency.record(
            IdempotencyEntry(owner.tenant_id, owner.principal_id, "key-1", "sha256:x", sid, T0)
        )
        await uow.events.append(
            ProcessEvent(
                id=self.uuid(),
                tenant_id=owner.tenant_id,
                principal_id=owner.principal_id,
                event_type="schedule.occurrence.materialized",
                actor="scheduler",
                payload={"session_id": str(o.session.id), "run_id": str(o.run.id)},
                occurred_at=T0,
                schedule_id=sid,
            )
        )
        self.owned[(owner.tenant_id, owner.principal_id)] = o


async def seeded_world(url: str) -> PersistenceWorld:
    """Seed a ``PersistenceWorld`` into the database at ``url`` as the admin login."""
    world = PersistenceWorld()
    factory = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with factory.begin() as uow:
            await world.seed(uow)
            await uow.commit()
    finally:
        await factory.dispose()
    return world


@asynccontextmanager
async def admin_connection(url: str) -> AsyncIterator[AsyncConnection]:
    """A plain admin connection (autocommit off; the caller commits or rolls back)."""
    engine = create_async_engine(to_asyncpg_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            yield conn
    finally:
        await engine.dispose()


async def row_counts(url: str, tables: tuple[str, ...] = OWNED_TABLES) -> dict[str, int]:
    """Row counts per table as the admin login (which bypasses row-level security)."""
    async with admin_connection(url) as conn:
        counts = {}
        for table in tables:
            result = await conn.execute(text(f"SELECT count(*) FROM {table}"))
            counts[table] = int(result.scalar_one())
        return counts


async def table_snapshot(url: str, tables: tuple[str, ...] = OWNED_TABLES) -> dict[str, Any]:
    """Every row of ``tables`` as text, for before/after comparisons."""
    async with admin_connection(url) as conn:
        snapshot: dict[str, Any] = {}
        for table in tables:
            rows = await conn.execute(text(f"SELECT t::text FROM {table} t ORDER BY 1"))
            snapshot[table] = [r[0] for r in rows]
        return snapshot


async def tables_containing(url: str, needle: str) -> set[str]:
    """Every table (of the declared metadata) with a row whose text contains ``needle``
    (as the admin login, which bypasses row-level security)."""
    found = set()
    async with admin_connection(url) as conn:
        for table in metadata.sorted_tables:
            sql = f"SELECT count(*) FROM {table.name} t WHERE t::text LIKE :m"
            if (await conn.execute(text(sql), {"m": f"%{needle}%"})).scalar_one():
                found.add(table.name)
    return found
