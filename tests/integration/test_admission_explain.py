"""EXPLAIN guard for the admission usage read (ADR 1702): with 100,000 finished
scheduled runs of one tenant older than the rolling windows, the read seeks only the
windows through the 0004 indexes (no sequential scan of runs) and returns what the
unbounded read returns. The unbounded read (the plausible wrong implementation) fails
the same guard."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Numeric, and_, case, cast, func, select, text
from tests.integration.test_persistence_explain import ExplainingTransaction, _nodes

from gates.checks.persistence_support import admin_connection
from scheduling.adapters.postgres.admission import (
    DAY,
    MONTH,
    PostgresAdmissionRepository,
    tenant_usage,
)
from scheduling.adapters.postgres.tables import runs
from simulation.provider._database_server import DatabaseServer

pytestmark = pytest.mark.postgres

NOW = datetime(2026, 6, 1, tzinfo=UTC)
HISTORY = 100_000
INDEXES = {
    "ix_runs_tenant_id_status",
    "ix_runs_tenant_id_finished_at",
    "ix_runs_tenant_id_created_at",
}

_COLUMNS = """(id, tenant_id, principal_id, session_id, agent_id, agent_version, policy_profile,
    status, priority, scheduled_for, requested_scopes, limits, created_at, updated_at,
    deadline_at, fencing_token, usage, cost, metadata, finished_at)"""


def _rows(count: int, status: str, age: str, finished: str) -> str:
    return f"""INSERT INTO runs {_COLUMNS}
    SELECT gen_random_uuid(), 'tenant-a', 'p', gen_random_uuid(), gen_random_uuid(), 'v1',
        'default', '{status}', 10, :now - {age}, '{{}}', '{{"max_cost": "2"}}',
        :now - {age}, :now - {age}, NULL, 0, '{{}}', 1.5,
        jsonb_build_object('schedule_id', gen_random_uuid()), {finished}
    FROM generate_series(1, {count}) g"""


_LOAD = [
    "SET LOCAL session_replication_role = replica",  # skip the foreign keys while loading
    # History: finished long before both cost windows.
    _rows(
        HISTORY,
        "COMPLETED",
        "interval '400 days' + g * interval '1 minute'",
        ":now - interval '300 days'",
    ),
    _rows(3, "QUEUED", "interval '2 days'", "NULL"),  # active (old but counted)
    _rows(4, "COMPLETED", "interval '10 days'", ":now - interval '10 days'"),  # month
    _rows(2, "FAILED", "interval '2 hours'", ":now - interval '1 hour'"),  # day
    _rows(5, "COMPLETED", "interval '30 seconds'", ":now - interval '10 seconds'"),  # rate
    "ANALYZE runs",
]


@pytest.fixture(scope="module")
def loaded(pg_server: DatabaseServer, pg_template: str) -> Iterator[str]:
    url = pg_server.create_database(template=pg_template)

    async def load() -> None:
        async with admin_connection(url) as conn:
            for statement in _LOAD:
                await conn.execute(
                    text(statement.replace(":now", "CAST(:now AS timestamptz)")),
                    {"now": NOW} if ":now" in statement else None,
                )
            await conn.commit()

    try:
        asyncio.run(load())
        yield url
    finally:
        pg_server.drop_database(url)


class _Uow:
    def __init__(self, tx: ExplainingTransaction) -> None:
        self.tx = tx
        self.admission = PostgresAdmissionRepository(tx)


async def unbounded_usage(uow: Any, tenant_id: str, now: datetime) -> tuple[Any, ...]:
    """The read before ADR 1702: every scheduled run of the tenant."""
    active = runs.c.status.in_(("QUEUED", "RUNNING"))
    finished = runs.c.finished_at
    reserve = func.coalesce(cast(runs.c.limits["max_cost"].astext, Numeric(18, 6)), 0)
    zero = Decimal(0)
    query = select(
        func.count().filter(active),
        func.count().filter(runs.c.created_at > now - timedelta(minutes=1)),
        func.coalesce(func.sum(case((active, reserve), else_=zero)), zero),
        func.coalesce(
            func.sum(case((and_(~active, finished > now - DAY), runs.c.cost), else_=zero)), zero
        ),
        func.coalesce(
            func.sum(case((and_(~active, finished > now - MONTH), runs.c.cost), else_=zero)), zero
        ),
    ).where(runs.c.tenant_id == tenant_id, runs.c.metadata.has_key("schedule_id"))
    return tuple((await uow.tx.execute(query)).one())


async def _explain(url: str, read: Any) -> tuple[list[tuple[str, Any]], Any]:
    async with admin_connection(url) as conn:
        await conn.begin()
        tx = ExplainingTransaction(conn)
        result = await read(_Uow(tx), "tenant-a", NOW)
        await conn.rollback()
        return tx.plans, result


def assert_bounded(plans: list[tuple[str, Any]]) -> None:
    nodes = [n for _, plan in plans for n in _nodes(plan)]
    used = {n.get("Index Name") for n in nodes}
    seq = [
        n for n in nodes if n.get("Node Type") == "Seq Scan" and n.get("Relation Name") == "runs"
    ]
    shown = json.dumps(plans, indent=1)[:4000]
    assert used >= INDEXES, shown
    assert not seq, shown


async def test_admission_usage_reads_only_its_windows(loaded: str) -> None:
    plans, usage = await _explain(loaded, tenant_usage)
    assert_bounded(plans)
    assert usage.active_runs == 3
    assert usage.materialized_last_minute == 5
    assert usage.active_reserved_cost == Decimal(6)
    assert usage.daily_committed_cost == Decimal("10.5")  # 2 failed + 5 recent, 1.5 each
    assert usage.monthly_committed_cost == Decimal("16.5")  # + 4 within the month
    _, unbounded = await _explain(loaded, unbounded_usage)
    assert unbounded == (
        usage.active_runs,
        usage.materialized_last_minute,
        usage.active_reserved_cost,
        usage.daily_committed_cost,
        usage.monthly_committed_cost,
    )


async def test_the_guard_fails_the_unbounded_read(loaded: str) -> None:
    plans, _ = await _explain(loaded, unbounded_usage)
    with pytest.raises(AssertionError):
        assert_bounded(plans)
