"""Shared contract fixtures: one ``uow_factory`` per adapter in ``registry.toml``.

Every test of a contract suite runs once per registered adapter (the test id ends in
``[memory]`` or ``[postgres]``); the PostgreSQL adapter gets a fresh clone of the
migrated template from the provider.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from gates.checks.contract_calls import CALLS_ENV, LOG, RecordingFactory
from scheduling.adapters.memory import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.identity import Principal
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.records import (
    AgentVersionRecord,
    RunRecord,
    RunStatus,
    SessionRecord,
)
from scheduling.ports.unit_of_work import UnitOfWorkFactory

REGISTRY_PATH = Path(__file__).with_name("registry.toml")
REGISTRY: dict[str, Any] = tomllib.loads(REGISTRY_PATH.read_text(encoding="utf-8"))
ADAPTERS = sorted(REGISTRY["adapters"])

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
AGENT_ID = UUID("00000000-0000-4000-8000-00000000a9e1")
ALICE = Principal("tenant-a", "alice", frozenset({"schedule.read", "schedule.write"}))
BOB = Principal("tenant-a", "bob", frozenset({"schedule.read"}))
MALLORY = Principal("tenant-b", "alice", frozenset({"schedule.read"}))


def _recording(request: pytest.FixtureRequest, factory: Any) -> Any:
    """``factory`` behind the proxy that records calls into the adapter's own methods
    for this test's suite (gate.schedule.repository_contract reads the log)."""
    cls = request.node.cls
    suite = f"{request.node.path.name}::{'' if cls is None else cls.__name__}"
    return RecordingFactory(factory, LOG, suite, str(request.param))


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get(CALLS_ENV)
    if target:
        LOG.write(Path(target))


@pytest.fixture(params=ADAPTERS)
async def uow_factory(request: pytest.FixtureRequest) -> AsyncIterator[UnitOfWorkFactory]:
    """A unit-of-work factory of the registered adapter named by the test parameter."""
    name = request.param
    if name == "memory":
        memory = MemoryUnitOfWorkFactory()
        await _seed_agent(memory)
        yield _recording(request, memory)
    elif name == "postgres":
        url = request.getfixturevalue("pg_url")
        factory = PostgresUnitOfWorkFactory.from_url(url, pool_size=2)
        try:
            await _seed_agent(factory)
            yield _recording(request, factory)
        finally:
            await factory.dispose()
    else:  # registered without a builder: every suite fails for it (the gate sees that)
        pytest.fail(f"adapter {name!r} is registered in registry.toml but has no builder")


async def _seed_agent(factory: UnitOfWorkFactory) -> None:
    """Insert the agent version that sessions and runs refer to."""
    async with factory.begin() as uow:
        await uow.agents.put_version(Build().agent())
        await uow.commit()


@dataclass
class Ids:
    """Deterministic UUIDs for one test."""

    n: int = 0

    def next(self) -> UUID:
        self.n += 1
        return UUID(int=(0x5C4E << 112) | self.n)


@dataclass
class Build:
    """Builders of legal values and rows shared by the suites."""

    ids: Ids = field(default_factory=Ids)
    t0: datetime = T0
    alice: Principal = ALICE
    bob: Principal = BOB
    mallory: Principal = MALLORY

    def schedule(
        self,
        owner: Principal = ALICE,
        *,
        state: ScheduleState = ScheduleState.ACTIVE,
        next_fire_at: datetime | None = T0,
        updated_at: datetime = T0,
    ) -> tuple[Schedule, ScheduleRevision]:
        sid = self.ids.next()
        schedule = Schedule(
            id=sid,
            tenant_id=owner.tenant_id,
            principal_id=owner.principal_id,
            state=state,
            pause_reason="user" if state is ScheduleState.PAUSED else None,
            current_revision=1,
            next_fire_at=next_fire_at if state is ScheduleState.ACTIVE else None,
            consecutive_failures=0,
            created_at=T0 - timedelta(days=1),
            updated_at=updated_at,
        )
        return schedule, self.revision(sid, 1, owner)

    def revision(
        self, schedule_id: UUID, number: int, owner: Principal = ALICE
    ) -> ScheduleRevision:
        return ScheduleRevision(
            schedule_id=schedule_id,
            revision=number,
            title=f"Morning brief {number}",
            instruction="Summarize my unread mail.",
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            policy_profile="default",
            requested_scopes=frozenset({"schedule.read"}),
            limits=RunLimits(
                max_steps=10, max_model_calls=5, max_tool_calls=5, max_cost=Decimal("1.50")
            ),
            run_timeout_seconds=600,
            cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Berlin"},
            misfire_grace_seconds=300,
            max_consecutive_failures=3,
            created_by_principal_id=owner.principal_id,
            created_at=T0 - timedelta(days=1),
        )

    def agent(self) -> AgentVersionRecord:
        return AgentVersionRecord(
            agent_id=AGENT_ID,
            version="1.0.0",
            policy_profile="default",
            spec={"tools": []},
            limits={"max_steps": 10},
            content_hash="sha256:agent",
            created_at=T0 - timedelta(days=2),
        )

    def session(self, owner: Principal = ALICE, schedule_id: UUID | None = None) -> SessionRecord:
        metadata: dict[str, Any] = {}
        if schedule_id is not None:
            metadata = {"schedule_id": str(schedule_id), "schedule_revision": 1}
        return SessionRecord(
            id=self.ids.next(),
            tenant_id=owner.tenant_id,
            principal_id=owner.principal_id,
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            metadata=metadata,
            created_at=T0,
            updated_at=T0,
        )

    def run(self, session: SessionRecord, status: RunStatus = RunStatus.QUEUED) -> RunRecord:
        return RunRecord(
            id=self.ids.next(),
            tenant_id=session.tenant_id,
            principal_id=session.principal_id,
            session_id=session.id,
            agent_id=AGENT_ID,
            agent_version="1.0.0",
            policy_profile="default",
            status=status,
            priority=10,
            scheduled_for=T0,
            requested_scopes=frozenset({"schedule.read"}),
            limits={"max_steps": 10, "max_cost": "1.50"},
            created_at=T0,
            updated_at=T0,
            deadline_at=T0 + timedelta(minutes=10),
            usage={"steps": 0},
        )

    def missed(self, schedule: Schedule, nominal: datetime) -> ScheduleOccurrence:
        return ScheduleOccurrence(
            id=self.ids.next(),
            schedule_id=schedule.id,
            schedule_revision=schedule.current_revision,
            nominal_fire_at=nominal,
            disposition=OccurrenceDisposition.MISSED,
            session_id=None,
            run_id=None,
            reason_code="schedule.occurrence.missed_grace",
            authority_version=None,
            materialized_at=None,
            links_erased_at=None,
            created_at=nominal,
        )

    def materialized(
        self, schedule: Schedule, nominal: datetime, session_id: UUID, run_id: UUID
    ) -> ScheduleOccurrence:
        return ScheduleOccurrence(
            id=self.ids.next(),
            schedule_id=schedule.id,
            schedule_revision=schedule.current_revision,
            nominal_fire_at=nominal,
            disposition=OccurrenceDisposition.MATERIALIZED,
            session_id=session_id,
            run_id=run_id,
            reason_code=None,
            authority_version="av-1",
            materialized_at=nominal,
            links_erased_at=None,
            created_at=nominal,
        )


@pytest.fixture
def build() -> Build:
    return Build()
