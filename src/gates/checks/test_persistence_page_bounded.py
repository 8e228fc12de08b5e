"""gate.schedule.persistence_schema: row-level security keeps the API's reads to a page.

The spec names the indexes for the principal's list and the occurrence history, and
puts every API read under row-level security. The child tables' policies (revisions,
occurrences) admit a row when its parent schedule is visible, a correlated ``EXISTS``
over ``schedules``. PostgreSQL may run that ``EXISTS`` as a hashed subplan that first
reads every schedule the caller owns; with a generic plan (what a prepared statement
runs after its fifth execution) and statistics taken while the tables were small, it
does, and each point read, list page and inbox page then costs the principal's whole
schedule count instead of a page (ADR 2710). Then the indexes the schema declares do
not serve the reads they exist for.

Measured by PostgreSQL, not by the product: ``pg_stat_get_xact_tuples_returned``
counts, per transaction, the rows a scan of ``schedules`` returned and the entries
each of its indexes returned (index-only scans included). Each read runs through its
own repository code as the API role, in a unit of work whose transaction forces
generic plans, over three callers (the owner with 2,000 schedules, another principal
of its tenant and the owner's principal id in another tenant, 300 each): first with
the statistics taken while the tables were empty (autovacuum off for them), then
after ``ANALYZE``. A read may touch at most twice a page of schedule rows, plus eight
(measured: 2, 52 and 102 to 106: the page, and one parent probe per child row).

Test of the test: ``scheduling-gates mutate --mutant policies.parent_exists_unfenced``
(revision 0009's fence dropped: the list page reads all 2,000) and
tests/integration/test_policy_parent_probe.py (the same reads by their plans).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import T0, PersistenceWorld, admin_connection
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.identity import Principal
from scheduling.domain.paging import PageRequest
from scheduling.testing import PostgresUnitOfWork, PostgresUnitOfWorkFactory, role_names

pytestmark = pytest.mark.postgres

OWNER = Principal("tenant-a", "owner", frozenset({"schedule.read"}))
NEIGHBOUR = Principal("tenant-a", "neighbour", frozenset({"schedule.read"}))
NAMESAKE = Principal("tenant-b", "owner", frozenset({"schedule.read"}))
CALLERS = ((OWNER, 2_000), (NEIGHBOUR, 300), (NAMESAKE, 300))
OCCURRENCES = 120  # of each caller's first schedule: more than a page
PAGE = 50
BOUND = 2 * (PAGE + 1) + 8  # a row and its parent probe each, and a little slack
TABLES = ("schedules", "schedule_revisions", "schedule_occurrences")

# Rows of ``schedules`` this transaction's scans returned: the heap's sequential
# scans and every index of the table (index-only scans count here too).
READ_SO_FAR = text(
    "SELECT pg_stat_get_xact_tuples_returned('schedules'::regclass)"
    " + coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)"
    " FROM pg_index WHERE indrelid = 'schedules'::regclass"
)


def first_of(caller: int) -> UUID:
    return UUID(int=(caller << 32) | 1)


def _load(caller: int, principal: Principal, count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` schedules (ids ``caller<<32 | n``), one revision each, and
    ``OCCURRENCES`` missed occurrences of the first; bulk SQL, triggers off."""
    definition = PersistenceWorld().revision(first_of(caller), 1, principal).to_definition()
    base = {"c": caller << 32, "t": principal.tenant_id, "p": principal.principal_id}
    return [
        (
            "INSERT INTO schedules (id, tenant_id, principal_id, state, pause_reason,"
            " current_revision, next_fire_at, consecutive_failures, created_at, updated_at)"
            " SELECT CAST(lpad(to_hex(CAST(:c AS bigint) + g), 32, '0') AS uuid), :t, :p,"
            " 'ACTIVE', NULL, 1, CAST(:t0 AS timestamptz) + interval '1 day', 0,"
            " CAST(:t0 AS timestamptz), CAST(:t0 AS timestamptz) + g * interval '1 s'"
            " FROM generate_series(1, CAST(:n AS int)) g",
            {**base, "n": count, "t0": T0},
        ),
        (
            "INSERT INTO schedule_revisions SELECT id, 1, CAST(:d AS jsonb), principal_id,"
            " created_at FROM schedules WHERE tenant_id = :t AND principal_id = :p",
            {**base, "d": json.dumps(definition)},
        ),
        (
            "INSERT INTO schedule_occurrences (id, schedule_id, schedule_revision,"
            " nominal_fire_at, disposition, reason_code, created_at)"
            " SELECT md5(:t || :p || g)::uuid, CAST(:s AS uuid), 1,"
            " CAST(:t0 AS timestamptz) - g * interval '1 day', 'MISSED',"
            " 'schedule.occurrence.missed_grace', CAST(:t0 AS timestamptz)"
            " FROM generate_series(1, CAST(:n AS int)) g",
            {**base, "s": str(first_of(caller)), "n": OCCURRENCES, "t0": T0},
        ),
    ]


async def young_world(url: str) -> None:
    """The tables analyzed while empty (a young deployment's statistics), autovacuum
    off for them so nothing refreshes those statistics, then the callers' rows."""
    async with admin_connection(url) as conn:
        for table in TABLES:
            await conn.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
            await conn.execute(text(f"ANALYZE {table}"))
        await conn.commit()
        # Known-consistent bulk data: skip the foreign-key triggers while loading.
        await conn.execute(text("SET LOCAL session_replication_role = replica"))
        for caller, (principal, count) in enumerate(CALLERS, start=1):
            for statement, params in _load(caller, principal, count):
                await conn.execute(text(statement), params)
        await conn.commit()


async def analyze(url: str) -> None:
    async with admin_connection(url) as conn:
        for table in TABLES:
            await conn.execute(text(f"ANALYZE {table}"))
        await conn.commit()


Read = Callable[[PostgresUnitOfWork, Principal, UUID], Awaitable[Any]]


async def _point(uow: PostgresUnitOfWork, who: Principal, first: UUID) -> Any:
    schedule, revision = await uow.schedules.get_current(first, who)
    assert (schedule.id, revision.revision) == (first, 1)
    return [schedule.id]


async def _list(uow: PostgresUnitOfWork, who: Principal, first: UUID) -> Any:
    page = await uow.schedules.list_summaries(who, PageRequest(PAGE))
    assert len(page.items) == PAGE
    assert page.next_cursor is not None
    return [item.id for item in page.items]


async def _inbox(uow: PostgresUnitOfWork, who: Principal, first: UUID) -> Any:
    page = await uow.occurrences.list(first, who, PageRequest(PAGE))
    assert len(page.items) == PAGE
    assert {o.schedule_id for o in page.items} == {first}
    return [first]


READS: dict[str, Read] = {"point_read": _point, "list_page": _list, "inbox_page": _inbox}


async def rows_read(url: str, who: Principal, caller: int, read: Read) -> tuple[int, list[Any]]:
    """Rows of ``schedules`` that ``read`` made PostgreSQL return, as the API role with
    generic plans, and the schedule ids it answered with."""
    factory = PostgresUnitOfWorkFactory.from_url(url, assume_role=role_names().api, pool_size=1)
    try:
        uow = factory.begin(who)
        async with uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            before = (await uow.tx.execute(READ_SO_FAR)).scalar_one()
            answered = await read(uow, who, first_of(caller))
            after = (await uow.tx.execute(READ_SO_FAR)).scalar_one()
        return int(after - before), answered
    finally:
        await factory.dispose()


async def page_bound_problems(url: str) -> tuple[list[str], dict[str, Any]]:
    await young_world(url)
    owned = {
        c: {UUID(int=(c << 32) | n) for n in range(1, count + 1)}
        for c, (_, count) in enumerate(CALLERS, start=1)
    }
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    for statistics in ("young", "analyzed"):
        if statistics == "analyzed":
            await analyze(url)
        for caller, (who, count) in enumerate(CALLERS, start=1):
            for name, read in READS.items():
                read_rows, answered = await rows_read(url, who, caller, read)
                where = f"{name}, {statistics} statistics, {who.tenant_id}/{who.principal_id}"
                evidence[where] = {"schedule_rows_read": read_rows, "owned": count}
                if read_rows > BOUND:
                    problems.append(
                        f"{where}: read {read_rows} schedule rows (a page allows {BOUND};"
                        f" the caller owns {count})"
                    )
                if not set(answered) <= owned[caller]:
                    problems.append(f"{where}: answered another caller's schedule")
    return problems, evidence


@pytest.mark.gate("gate.schedule.persistence_schema")
async def test_api_reads_cost_a_page_under_row_level_security(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    problems, evidence = await page_bound_problems(pg_url)
    gate_evidence.record("page_bounded_reads", evidence)
    gate_evidence.record(
        "instrument",
        "pg_stat_get_xact_tuples_returned over schedules and its indexes;"
        " plan_cache_mode = force_generic_plan",
    )
    assert problems == [], problems
