"""EXPLAIN guards: with 100,000 schedules loaded, the repository's own queries use
their indexes (due scan, principal-scoped list with and without a state filter,
occurrence history, terminal-retention sweep), as admin and under the API role's
row-level security. The plans are taken from the exact SQL the repositories send."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gates.checks.persistence_support import admin_connection
from scheduling.adapters.postgres.repositories.occurrences import PostgresOccurrenceRepository
from scheduling.adapters.postgres.repositories.schedules import PostgresScheduleRepository
from scheduling.adapters.postgres.roles import role_names
from scheduling.domain.identity import Principal
from scheduling.domain.paging import PageRequest
from scheduling.domain.schedule import ScheduleState
from simulation.provider._database_server import DatabaseServer
from testsupport.observed import ObservedTransaction, act_as

T0 = datetime(2026, 6, 1, tzinfo=UTC)
SCHEDULES = 100_000
OCCURRENCES = 100_000

_LOAD = [
    # Known-consistent bulk data: skip the foreign-key triggers while loading.
    "SET LOCAL session_replication_role = replica",
    f"""INSERT INTO schedules (id, tenant_id, principal_id, state, pause_reason, current_revision,
        next_fire_at, consecutive_failures, created_at, updated_at)
    SELECT md5('s' || g)::uuid, 'tenant-' || (g % 100), 'p-' || (g % 1000),
        CASE WHEN g % 20 = 0 THEN 'COMPLETED' WHEN g % 20 = 1 THEN 'CANCELLED'
             WHEN g % 10 = 2 THEN 'PAUSED' ELSE 'ACTIVE' END,
        CASE WHEN g % 10 = 2 THEN 'user' END,
        1,
        CASE WHEN g % 20 IN (0, 1) OR g % 10 = 2 THEN NULL
             ELSE :t0 + (g % 43200) * interval '1 minute' END,
        0, :t0 - interval '40 days', :t0 - interval '35 days' + (g % 100000) * interval '30 s'
    FROM generate_series(1, {SCHEDULES}) g""",
    """INSERT INTO schedule_revisions
    SELECT id, 1, '{"load": true}'::jsonb, principal_id, created_at FROM schedules""",
    f"""INSERT INTO schedule_occurrences (id, schedule_id, schedule_revision, nominal_fire_at,
        disposition, reason_code, created_at)
    SELECT md5('o' || g)::uuid, md5('s' || (g % 20000 + 1))::uuid, 1,
        :t0 - (g / 20000) * interval '1 day', 'MISSED', 'schedule.occurrence.missed_grace', :t0
    FROM generate_series(1, {OCCURRENCES}) g""",
    "ANALYZE schedules",
    "ANALYZE schedule_revisions",
    "ANALYZE schedule_occurrences",
]


class ExplainingTransaction(ObservedTransaction):
    """Runs EXPLAIN on every statement before executing it, and keeps the plans."""

    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__(conn)
        self.plans: list[tuple[str, Any]] = []

    async def observe(self, sql: str, args: list[Any]) -> None:
        explained = await self.conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql, tuple(args))
        document = explained.scalar_one()
        if isinstance(document, str):
            document = json.loads(document)
        self.plans.append((sql, document[0]["Plan"]))


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def _uses(plans: list[tuple[str, Any]], index: str, table: str) -> None:
    nodes = [n for _, plan in plans for n in _nodes(plan)]
    assert any(n.get("Index Name") == index for n in nodes), json.dumps(plans, indent=1)[:6000]
    seq = [n for n in nodes if n.get("Node Type") == "Seq Scan" and n.get("Relation Name") == table]
    assert seq == [], json.dumps(plans, indent=1)[:6000]


async def _load(url: str) -> None:
    started = time.perf_counter()
    async with admin_connection(url) as conn:
        for statement in _LOAD:
            params = {"t0": T0} if ":t0" in statement else None
            await conn.execute(text(statement.replace(":t0", "CAST(:t0 AS timestamptz)")), params)
        await conn.commit()
    elapsed = time.perf_counter() - started
    print(f"loaded {SCHEDULES} schedules and {OCCURRENCES} occurrences in {elapsed:.2f}s")


@pytest.fixture(scope="module")
def loaded(pg_server: DatabaseServer, pg_template: str) -> Iterator[str]:
    """One clone of the migrated template with the bulk data, shared by this module."""
    url = pg_server.create_database(template=pg_template)
    try:
        asyncio.run(_load(url))
        yield url
    finally:
        pg_server.drop_database(url)


async def _explain(
    url: str, role: str | None, principal: Principal | None, run: Any, *, drop: str | None = None
) -> Any:
    async with admin_connection(url) as conn:
        await conn.begin()
        if drop is not None:  # rolled back below: the shared data set is not changed
            await conn.execute(text(f"DROP INDEX {drop}"))
        if role is not None:
            await conn.execute(text(f"SET LOCAL ROLE {role}"))
        if principal is not None:
            await act_as(conn, principal)
        tx = ExplainingTransaction(conn)
        result = await run(tx)
        await conn.rollback()
        return tx.plans, result


ROLES = role_names()
OWNER = Principal("tenant-7", "p-7")  # g % 1000 == 7: 100 schedules, ~75 ACTIVE


@pytest.mark.parametrize("role", [None, ROLES.api], ids=["admin", "api-role"])
async def test_principal_list_uses_the_listing_index(loaded: str, role: str | None) -> None:
    for states in (None, frozenset({ScheduleState.ACTIVE, ScheduleState.PAUSED})):
        plans, page = await _explain(
            loaded,
            role,
            OWNER,
            lambda tx, s=states: PostgresScheduleRepository(tx).list(OWNER, PageRequest(20), s),
        )
        assert len(page.items) == 20
        _uses(plans, "ix_schedules_tenant_id_principal_id_updated_at_id", "schedules")
        # The second page (keyset cursor) uses the same index.
        plans, second = await _explain(
            loaded,
            role,
            OWNER,
            lambda tx, s=states, c=page.next_cursor: PostgresScheduleRepository(tx).list(
                OWNER, PageRequest(20, c), s
            ),
        )
        assert not {x.id for x in second.items} & {x.id for x in page.items}
        _uses(plans, "ix_schedules_tenant_id_principal_id_updated_at_id", "schedules")


async def test_due_scan_and_next_fire_use_the_due_index(loaded: str) -> None:
    now = T0 + timedelta(hours=2)
    plans, due = await _explain(
        loaded, ROLES.scheduler, None, lambda tx: PostgresScheduleRepository(tx).due(now, 100)
    )
    assert len(due) == 100
    _uses(plans, "ix_schedules_state_next_fire_at", "schedules")
    plans, first = await _explain(
        loaded, ROLES.scheduler, None, lambda tx: PostgresScheduleRepository(tx).next_fire_at()
    )
    assert first is not None
    _uses(plans, "ix_schedules_state_next_fire_at", "schedules")


@pytest.mark.parametrize("role", [None, ROLES.api], ids=["admin", "api-role"])
async def test_occurrence_history_uses_the_history_index(loaded: str, role: str | None) -> None:
    schedule_id = UUID(bytes=hashlib.md5(b"s8007").digest())
    owner = Principal("tenant-7", "p-7")  # g = 8007: tenant-7 / p-7
    plans, page = await _explain(
        loaded,
        role,
        owner,
        lambda tx: PostgresOccurrenceRepository(tx).list(schedule_id, owner, PageRequest(5)),
    )
    assert len(page.items) == 5
    _uses(plans, "ix_schedule_occurrences_history", "schedule_occurrences")


async def test_terminal_sweep_uses_the_retention_index(loaded: str) -> None:
    before = T0 - timedelta(days=30)
    plans, purged = await _explain(
        loaded,
        None,
        None,
        lambda tx: PostgresScheduleRepository(tx).purge_terminal("tenant-20", before, 100),
    )
    assert purged > 0
    _uses(plans[:2], "ix_schedules_terminal_retention", "schedules")


@pytest.mark.parametrize(
    ("index", "table", "query"),
    [
        (
            "ix_schedules_state_next_fire_at",
            "schedules",
            lambda tx: PostgresScheduleRepository(tx).due(T0 + timedelta(hours=2), 100),
        ),
        (
            "ix_schedules_tenant_id_principal_id_updated_at_id",
            "schedules",
            lambda tx: PostgresScheduleRepository(tx).list(OWNER, PageRequest(20)),
        ),
        (
            "ix_schedule_occurrences_history",
            "schedule_occurrences",
            lambda tx: PostgresOccurrenceRepository(tx).latest(
                UUID(bytes=hashlib.md5(b"s8007").digest())
            ),
        ),
    ],
)
async def test_each_guard_fails_without_its_index(
    loaded: str, index: str, table: str, query: Any
) -> None:
    plans, _ = await _explain(loaded, None, OWNER, query)
    _uses(plans, index, table)
    plans, _ = await _explain(loaded, None, OWNER, query, drop=index)
    with pytest.raises(AssertionError):
        _uses(plans, index, table)
