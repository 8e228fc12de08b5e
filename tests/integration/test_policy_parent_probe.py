"""A read's work is bounded by its page, not by how many schedules the caller owns.

The API role reads revisions and occurrences through child-table policies that admit a
row when its parent schedule is visible (a correlated ``EXISTS``). PostgreSQL may run
that ``EXISTS`` as a hashed subplan that first reads every schedule the caller can
see; it does so under a generic plan (what a prepared statement runs after its fifth
execution) when the statistics were taken while the tables were small, which is every
young deployment. Revision 0009 fences the subquery (``OFFSET 0``) so each child row
costs one primary-key probe (ADR 2710).

Each read below runs through the repository as the API role, with the principal's
settings and ``plan_cache_mode = force_generic_plan``; every statement it sends is
prepared, run under ``EXPLAIN (ANALYZE)`` and then for real. No plan node may touch
more rows than twice the page (a hashed subplan over the owner's 3,000 schedules
does). Checked with the statistics taken while the tables were empty and again after
``ANALYZE`` of the loaded data. The test of the test puts the policies back as
revision 0008 wrote them (inside the rolled-back transaction) and sees the bound broken.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from gates.checks.persistence_support import PersistenceWorld, admin_connection
from scheduling.adapters.postgres.repositories.occurrences import PostgresOccurrenceRepository
from scheduling.adapters.postgres.repositories.schedules import PostgresScheduleRepository
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import Transaction
from scheduling.domain.identity import Principal
from scheduling.domain.paging import PageRequest
from simulation.provider._database_server import DatabaseServer
from testsupport.observed import ObservedTransaction, act_as

T0 = datetime(2026, 6, 1, tzinfo=UTC)
OWNER = Principal("tenant-a", "owner")
OWNED = 3_000  # the owner's schedules: far beyond one page
OTHERS = 500  # another principal's, in the same tenant
OCCURRENCES = 200  # of the owner's first schedule
PAGE = 50
BOUND = 2 * (PAGE + 1)
TABLES = ("schedules", "schedule_revisions", "schedule_occurrences")
FIRST = UUID(int=1)

# Every schedule's revision 1: a complete definition (the point read builds it).
DEFINITION = json.dumps(PersistenceWorld().revision(FIRST, 1, OWNER).to_definition())

# Revision 0008's predicates, for the test of the test.
_UNFENCED = (
    ("schedule_revisions_api", "schedule_revisions", "schedule_id"),
    ("schedule_occurrences_api", "schedule_occurrences", "schedule_id"),
)

_LOAD = [
    # Known-consistent bulk data: skip the foreign-key triggers while loading.
    "SET LOCAL session_replication_role = replica",
    f"""INSERT INTO schedules (id, tenant_id, principal_id, state, pause_reason,
        current_revision, next_fire_at, consecutive_failures, created_at, updated_at)
    SELECT ('00000000-0000-0000-0000-' || lpad(to_hex(g), 12, '0'))::uuid, 'tenant-a',
        CASE WHEN g <= {OWNED} THEN 'owner' ELSE 'other' END, 'ACTIVE', NULL, 1,
        :t0 + interval '1 day', 0, :t0, :t0 + g * interval '1 s'
    FROM generate_series(1, {OWNED + OTHERS}) g""",
    """INSERT INTO schedule_revisions
    SELECT id, 1, :definition, principal_id, created_at FROM schedules""",
    f"""INSERT INTO schedule_occurrences (id, schedule_id, schedule_revision, nominal_fire_at,
        disposition, reason_code, created_at)
    SELECT md5('o' || g)::uuid, '{FIRST}'::uuid, 1, :t0 - g * interval '1 day', 'MISSED',
        'schedule.occurrence.missed_grace', :t0
    FROM generate_series(1, {OCCURRENCES}) g""",
]


def _literal(value: Any) -> str:
    """``value`` as an SQL literal for ``EXECUTE`` (which takes no bound parameters);
    the prepared statement's casts give it its type."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        value = value.isoformat()
    return "'" + str(value).replace("'", "''") + "'"


class GenericPlanTransaction(ObservedTransaction):
    """Every statement prepared and run once under ``EXPLAIN (ANALYZE)`` with a generic
    plan before it runs for real; the plans are kept."""

    def __init__(self, conn: AsyncConnection) -> None:
        super().__init__(conn)
        self.plans: list[tuple[str, Any]] = []

    async def observe(self, sql: str, args: list[Any]) -> None:
        name = f"probe_{len(self.plans)}"
        await self.conn.exec_driver_sql(f"PREPARE {name} AS {sql}")
        listed = ", ".join(_literal(a) for a in args)
        explained = await self.conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}" + (f"({listed})" if args else "")
        )
        document = explained.scalar_one()
        if isinstance(document, str):
            document = json.loads(document)
        self.plans.append((sql, document[0]["Plan"]))
        await self.conn.exec_driver_sql(f"DEALLOCATE {name}")


def _nodes(plan: Any) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def widest(plans: list[tuple[str, Any]]) -> int:
    """The most rows any plan node produced over all its loops."""
    return max(
        int(node["Actual Rows"]) * int(node["Actual Loops"])
        for _, plan in plans
        for node in _nodes(plan)
    )


Read = Callable[[Transaction], Awaitable[Any]]

READS: dict[str, Read] = {
    "point read": lambda tx: PostgresScheduleRepository(tx).get_current(FIRST, OWNER),
    "list page": lambda tx: PostgresScheduleRepository(tx).list_summaries(OWNER, PageRequest(PAGE)),
    "occurrence page": lambda tx: PostgresOccurrenceRepository(tx).list(
        FIRST, OWNER, PageRequest(PAGE)
    ),
}


async def _prepare(url: str) -> None:
    """The tables analyzed while empty (a young deployment's statistics), autovacuum off
    so nothing refreshes them during the test, then the load."""
    async with admin_connection(url) as conn:
        for table in TABLES:
            await conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
            await conn.execute(text(f"ANALYZE {table}"))
        await conn.commit()
        for statement in _LOAD:
            sql = statement.replace(":t0", "CAST(:t0 AS timestamptz)")
            sql = sql.replace(":definition", "CAST(:definition AS jsonb)")
            params = {"t0": T0} if ":t0" in statement else {"definition": DEFINITION}
            await conn.execute(text(sql), params)
        await conn.commit()


async def _read(
    url: str, read: Read, *, analyzed: bool = False, unfenced: bool = False
) -> tuple[Any, list[tuple[str, Any]]]:
    """``read`` as the owner through the API role, generic plans forced; everything it
    changes (statistics, policies) is rolled back."""
    async with admin_connection(url) as conn:
        await conn.begin()
        if analyzed:  # statistics of the loaded tables, rolled back with the rest
            for table in TABLES:
                await conn.execute(text(f"ANALYZE {table}"))
        if unfenced:  # rolled back below
            for policy, table, column in _UNFENCED:
                visible = f"EXISTS (SELECT 1 FROM schedules p WHERE p.id = {table}.{column})"
                await conn.execute(
                    text(
                        f"ALTER POLICY {policy} ON {table} USING ({visible}) WITH CHECK ({visible})"
                    )
                )
        await conn.execute(text(f"SET LOCAL ROLE {role_names().api}"))
        await conn.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
        await act_as(conn, OWNER)
        tx = GenericPlanTransaction(conn)
        result = await read(tx)
        await conn.rollback()
        return result, tx.plans


@pytest.fixture(scope="module")
def loaded(pg_server: DatabaseServer, pg_template: str) -> Iterator[str]:
    url = pg_server.create_database(template=pg_template)
    try:
        asyncio.run(_prepare(url))
        yield url
    finally:
        pg_server.drop_database(url)


def _shape(name: str, result: Any) -> None:
    """The read returned what it should (the bound is about work, not a short page)."""
    if name == "point read":
        schedule, revision = result
        assert schedule.id == FIRST
        assert revision.revision == 1
    else:
        assert len(result.items) == PAGE
        assert result.next_cursor is not None


@pytest.mark.parametrize("analyzed", [False, True], ids=["young-statistics", "analyzed"])
@pytest.mark.parametrize("name", list(READS))
async def test_read_work_is_bounded_by_the_page(loaded: str, name: str, analyzed: bool) -> None:
    result, plans = await _read(loaded, READS[name], analyzed=analyzed)
    _shape(name, result)
    assert widest(plans) <= BOUND, json.dumps(plans, indent=1)[:6000]


@pytest.mark.parametrize("name", ["point read", "list page", "occurrence page"])
async def test_unfenced_policies_read_every_owned_schedule(loaded: str, name: str) -> None:
    """Test of the test: revision 0008's predicates, same data and statistics."""
    result, plans = await _read(loaded, READS[name], unfenced=True)
    _shape(name, result)
    assert widest(plans) >= OWNED, json.dumps(plans, indent=1)[:3000]
