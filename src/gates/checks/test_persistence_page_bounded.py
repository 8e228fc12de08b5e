"""gate.schedule.persistence_schema: row-level security keeps the API's reads to a page.

The spec names the indexes for the principal's list and the occurrence history, and
puts every API read under row-level security. The child tables' policies (revisions,
occurrences, session events) admit a row when its parent is visible, a correlated
``EXISTS`` over the parent table. PostgreSQL may run that ``EXISTS`` as a hashed
subplan that first reads every parent row the caller owns; with a generic plan (what a
prepared statement runs after its fifth execution) and statistics taken while the
tables were small, it does, and each point read, list page, inbox page and transcript
then costs the principal's whole schedule or session count instead of a page (ADR
2710). Then the indexes the schema declares do not serve the reads they exist for.

Measured by PostgreSQL, not by the product: ``pg_stat_get_xact_tuples_returned``
counts, per transaction, the rows a scan of the parent table returned and the entries
each of its indexes returned (index-only scans included). Each read runs through its
own repository code as the API role, in a unit of work whose transaction forces
generic plans, over three callers (the owner with 2,000 schedules and 2,000 sessions,
another principal of its tenant and the owner's principal id in another tenant, 300
each): first with the statistics taken while the tables were empty (autovacuum off for
them), then after ``ANALYZE``. Each read has a bound of its own (``READS``): the rows
it answers with and one parent probe per child row, plus slack (measured: 2, 52, 102 to
106, and 61 to 120 for a 60-event transcript).

Test of the test: ``scheduling-gates mutate --mutant policies.parent_exists_unfenced``
(revision 0009's fence dropped: the reads return 2,001 to 2,601 rows) and
``--mutant policies.session_events_unfenced`` (only the transcript's policy unfenced:
2,060); tests/integration/test_policy_parent_probe.py checks the schedule reads by
their plans.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
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
EVENTS = 60  # of each caller's first session (a transcript is read whole)
PAGE = 50
SLACK = 8
TABLES = ("schedules", "schedule_revisions", "schedule_occurrences", "sessions", "session_events")

# Rows of a table this transaction's scans returned: the heap's sequential scans and
# every index of the table (index-only scans count here too).
READ_SO_FAR = text(
    "SELECT pg_stat_get_xact_tuples_returned(CAST(:t AS regclass))"
    " + coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0)"
    " FROM pg_index WHERE indrelid = CAST(:t AS regclass)"
)


def first_of(caller: int) -> UUID:
    """The caller's first schedule (schedule ids are ``caller<<32 | n``)."""
    return UUID(int=(caller << 32) | 1)


def first_session_of(caller: int) -> UUID:
    """The caller's first session (session ids are ``caller<<48 | n``)."""
    return UUID(int=(caller << 48) | 1)


def _load(caller: int, principal: Principal, count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` schedules, one revision each, ``OCCURRENCES`` missed occurrences of the
    first; ``count`` sessions, ``EVENTS`` events in the first; bulk SQL, triggers off."""
    revision = PersistenceWorld().revision(first_of(caller), 1, principal)
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
            {**base, "d": json.dumps(revision.to_definition())},
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
        (
            "INSERT INTO sessions (id, tenant_id, principal_id, agent_id, agent_version,"
            " metadata, title, created_at, updated_at)"
            " SELECT CAST(lpad(to_hex(CAST(:sc AS bigint) + g), 32, '0') AS uuid), :t, :p,"
            " CAST(:a AS uuid), :v, CAST('{}' AS jsonb), 'session', CAST(:t0 AS timestamptz),"
            " CAST(:t0 AS timestamptz) FROM generate_series(1, CAST(:n AS int)) g",
            {
                **base,
                "sc": caller << 48,
                "a": str(revision.agent_id),
                "v": revision.agent_version,
                "n": count,
                "t0": T0,
            },
        ),
        (
            "INSERT INTO session_events (session_id, seq, run_id, event_type, actor,"
            " context_only, payload, occurred_at)"
            " SELECT CAST(:s AS uuid), g, NULL, 'message.user', 'user', false,"
            " CAST('{}' AS jsonb), CAST(:t0 AS timestamptz) + g * interval '1 s'"
            " FROM generate_series(1, CAST(:n AS int)) g",
            {"s": str(first_session_of(caller)), "n": EVENTS, "t0": T0},
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


Read = Callable[[PostgresUnitOfWork, Principal, int], Awaitable[list[UUID]]]
"""A read as ``caller`` (its number), returning the ids it answered with."""


async def _point(uow: PostgresUnitOfWork, who: Principal, caller: int) -> list[UUID]:
    first = first_of(caller)
    schedule, revision = await uow.schedules.get_current(first, who)
    assert (schedule.id, revision.revision) == (first, 1)
    return [schedule.id]


async def _list(uow: PostgresUnitOfWork, who: Principal, caller: int) -> list[UUID]:
    page = await uow.schedules.list_summaries(who, PageRequest(PAGE))
    assert len(page.items) == PAGE
    assert page.next_cursor is not None
    return [item.id for item in page.items]


async def _inbox(uow: PostgresUnitOfWork, who: Principal, caller: int) -> list[UUID]:
    first = first_of(caller)
    page = await uow.occurrences.list(first, who, PageRequest(PAGE))
    assert len(page.items) == PAGE
    assert {o.schedule_id for o in page.items} == {first}
    return [first]


async def _transcript(uow: PostgresUnitOfWork, who: Principal, caller: int) -> list[UUID]:
    session = first_session_of(caller)
    events = await uow.sessions.events(session, who, include_context_only=False)
    assert len(events) == EVENTS
    return [session]


@dataclass(frozen=True)
class BoundedRead:
    parent: str
    """The table whose rows the child table's policy probes."""
    bound: int
    """The most rows of ``parent`` the read may make PostgreSQL return."""
    read: Read


# A page's rows and one parent probe per child row, plus slack (measured: 2, 52 and
# 102-106; a transcript's 60 events 61-120, the owner check beside each probe).
READS = {
    "point_read": BoundedRead("schedules", 2 + SLACK, _point),
    "list_page": BoundedRead("schedules", 2 * (PAGE + 1) + SLACK, _list),
    "inbox_page": BoundedRead("schedules", PAGE + 2 + SLACK, _inbox),
    "transcript": BoundedRead("sessions", 2 * (EVENTS + 1) + SLACK, _transcript),
}


async def rows_read(
    url: str, who: Principal, caller: int, spec: BoundedRead
) -> tuple[int, list[UUID]]:
    """Rows of ``spec.parent`` that ``spec.read`` made PostgreSQL return, as the API
    role with generic plans, and the ids it answered with."""
    factory = PostgresUnitOfWorkFactory.from_url(url, assume_role=role_names().api, pool_size=1)
    try:
        uow = factory.begin(who)
        async with uow:
            assert isinstance(uow, PostgresUnitOfWork)
            await uow.tx.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            counted = {"t": spec.parent}
            before = (await uow.tx.execute(READ_SO_FAR, counted)).scalar_one()
            answered = await spec.read(uow, who, caller)
            after = (await uow.tx.execute(READ_SO_FAR, counted)).scalar_one()
        return int(after - before), answered
    finally:
        await factory.dispose()


async def page_bound_problems(url: str) -> tuple[list[str], dict[str, Any]]:
    await young_world(url)
    owned = {
        c: {UUID(int=(c << shift) | n) for n in range(1, count + 1) for shift in (32, 48)}
        for c, (_, count) in enumerate(CALLERS, start=1)
    }
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    for statistics in ("young", "analyzed"):
        if statistics == "analyzed":
            await analyze(url)
        for caller, (who, count) in enumerate(CALLERS, start=1):
            for name, spec in READS.items():
                read_rows, answered = await rows_read(url, who, caller, spec)
                where = f"{name}, {statistics} statistics, {who.tenant_id}/{who.principal_id}"
                evidence[where] = {f"{spec.parent}_rows_read": read_rows, "owned": count}
                if read_rows > spec.bound:
                    problems.append(
                        f"{where}: read {read_rows} rows of {spec.parent} (the read allows"
                        f" {spec.bound}; the caller owns {count})"
                    )
                if not set(answered) <= owned[caller]:
                    problems.append(f"{where}: answered another caller's row")
    return problems, evidence


@pytest.mark.gate("gate.schedule.persistence_schema")
async def test_api_reads_cost_a_page_under_row_level_security(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    problems, evidence = await page_bound_problems(pg_url)
    gate_evidence.record("page_bounded_reads", evidence)
    gate_evidence.record(
        "instrument",
        "pg_stat_get_xact_tuples_returned over the parent table and its indexes;"
        " plan_cache_mode = force_generic_plan",
    )
    assert problems == [], problems
