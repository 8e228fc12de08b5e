"""gate.schedule.persistence_schema: the query indexes, checked by what the planner does.

The spec names the indexes for what they serve: (state, next_fire_at) for active due
scans, (schedule_id, nominal_fire_at DESC) for occurrence history (the offline inbox),
a partial (tenant_id, updated_at, id) index over COMPLETED and CANCELLED rows for
retention sweeps; admission reads a tenant's runs through the (tenant_id, ...) run
indexes (ADR 1702). Each product query runs here through its own repository code as
its own role (scheduler: due scan and admission window; API: an inbox page and the
next one; maintenance: the retention purge) and is EXPLAINed just before it runs
(``gates.checks.index_plans``, ``enable_seqscan = off`` as the instrument): the scan of
its table must be an index access on the index that serves it, and the inbox page
needs no Sort (the index order is the page order).

Test of the test: tests/integration/test_gate_hardening_index_plans.py (the retention
index narrowed to one state; the due-scan index's columns swapped).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from gates.checks.index_plans import explained, index_scans, sequential_scans, sorts
from gates.checks.persistence_support import ALICE, T0, seeded_world
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.paging import PageRequest
from scheduling.testing import (
    PostgresUnitOfWork,
    PostgresUnitOfWorkFactory,
    role_names,
    tenant_usage,
)

pytestmark = pytest.mark.postgres

ROLES = role_names()
LATER = T0 + timedelta(days=400)

Query = Callable[[PostgresUnitOfWork, Any], Awaitable[object]]


async def _due(uow: PostgresUnitOfWork, world: Any) -> object:
    return await uow.schedules.due(LATER, 100)


async def _inbox(uow: PostgresUnitOfWork, world: Any) -> object:
    sid = world.of(ALICE).schedule.id
    first = await uow.occurrences.list(sid, ALICE, PageRequest(limit=1))
    return await uow.occurrences.list(sid, ALICE, PageRequest(limit=1, cursor=first.next_cursor))


async def _purge(uow: PostgresUnitOfWork, world: Any) -> object:
    return await uow.schedules.purge_terminal(ALICE.tenant_id, LATER, 10)


async def _admission(uow: PostgresUnitOfWork, world: Any) -> object:
    return await tenant_usage(uow, ALICE.tenant_id, T0)


@dataclass(frozen=True)
class IndexedQuery:
    name: str
    role: str
    table: str
    indexes: frozenset[str]
    """Any of these serves the query (admission may combine the run indexes)."""
    query: Query
    ordered: bool = False
    """The index must also deliver the ORDER BY (no Sort node)."""


QUERIES = (
    IndexedQuery(
        "due_scan",
        ROLES.scheduler,
        "schedules",
        frozenset({"ix_schedules_state_next_fire_at"}),
        _due,
    ),
    IndexedQuery(
        "occurrence_inbox_page",
        ROLES.api,
        "schedule_occurrences",
        frozenset({"ix_schedule_occurrences_history"}),
        _inbox,
        ordered=True,
    ),
    IndexedQuery(
        "retention_purge",
        ROLES.maintenance,
        "schedules",
        frozenset({"ix_schedules_terminal_retention"}),
        _purge,
    ),
    IndexedQuery(
        "admission_window",
        ROLES.scheduler,
        "runs",
        frozenset(
            {
                "ix_runs_tenant_id_status",
                "ix_runs_tenant_id_finished_at",
                "ix_runs_tenant_id_created_at",
            }
        ),
        _admission,
    ),
)


async def _plans(url: str, world: Any, spec: IndexedQuery) -> list[dict[str, Any]]:
    factory = PostgresUnitOfWorkFactory.from_url(url, assume_role=spec.role, pool_size=1)
    try:
        with explained(factory.engine, spec.table) as seen:
            principal = ALICE if spec.role == ROLES.api else None
            tenant = ALICE.tenant_id if spec.role == ROLES.maintenance else None
            uow = factory.begin(principal, tenant_id=tenant)
            async with uow:
                assert isinstance(uow, PostgresUnitOfWork)
                await spec.query(uow, world)  # rolled back: the purge deletes nothing
        return [e.plan for e in seen]
    finally:
        await factory.dispose()


async def index_problems(url: str) -> tuple[list[str], dict[str, Any]]:
    """What is wrong with the plans of the product's indexed queries, and the evidence."""
    world = await seeded_world(url)
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    for spec in QUERIES:
        plans = await _plans(url, world, spec)
        if not plans:
            problems.append(f"{spec.name}: the product sent no query reading {spec.table}")
        used: list[list[str]] = []
        for plan in plans:
            scans = [(i, node) for rel, i, node in index_scans(plan) if rel == spec.table]
            used.append([f"{node} {i}" for i, node in scans])
            if spec.table in sequential_scans(plan):
                problems.append(f"{spec.name}: sequential scan of {spec.table}")
            if not scans or any(i not in spec.indexes for i, _ in scans):
                names = sorted({i for i, _ in scans})
                problems.append(
                    f"{spec.name}: {spec.table} read through {names or 'no index'},"
                    f" not {sorted(spec.indexes)}"
                )
            if spec.ordered and sorts(plan):
                problems.append(f"{spec.name}: the plan sorts; the index does not give the order")
        evidence[spec.name] = {"role": spec.role, "plans": len(plans), "index_access": used}
    return problems, evidence


@pytest.mark.gate("gate.schedule.persistence_schema")
async def test_each_query_uses_its_index(pg_url: str, gate_evidence: GateEvidence) -> None:
    problems, evidence = await index_problems(pg_url)
    gate_evidence.record("index_plans", evidence)
    gate_evidence.record("instrument", "EXPLAIN (FORMAT JSON) with enable_seqscan = off")
    assert problems == [], problems
