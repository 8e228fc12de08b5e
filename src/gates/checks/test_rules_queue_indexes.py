"""gate.schedule.persistence_schema: the outbox drain's query index, checked by what the
planner does (``gates.checks.index_plans``, as ``test_persistence_indexes`` does for the
due scan, the inbox page, the retention purge and the admission window).

The outbox drain reads the undelivered messages oldest first through the partial index
``ix_schedule_outbox_pending`` (``created_at, id`` where ``delivered_at IS NULL``). The
metadata checks see only that the index is partial, not what its predicate says, and
autogenerate compares neither: an index whose predicate the drain's filter does not
imply (or whose column order cannot give the drain's order) is visible only in the
plan. Here the drain's own repository call runs as the scheduler role and is EXPLAINed
just before it runs: its scan of ``schedule_outbox`` must be an index access on that
index, with no Sort.

Test of the test: ``scheduling-gates mutate`` (mutants
``queue.outbox_pending_index_inverted``, ``queue.outbox_pending_index_columns_swapped``).
"""

from __future__ import annotations

import pytest

from gates.checks.index_plans import explained, index_scans, sequential_scans, sorts
from gates.checks.persistence_support import seeded_world
from gates.runner.pytest_plugin import GateEvidence
from scheduling.testing import PostgresUnitOfWork, PostgresUnitOfWorkFactory, role_names

pytestmark = pytest.mark.postgres

ROLES = role_names()
TABLE = "schedule_outbox"
INDEX = "ix_schedule_outbox_pending"


@pytest.mark.gate("gate.schedule.persistence_schema")
async def test_the_outbox_drain_reads_through_its_pending_index(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await seeded_world(pg_url)
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=ROLES.scheduler, pool_size=1)
    try:
        with explained(factory.engine, TABLE) as seen:
            uow = factory.begin()
            async with uow:
                assert isinstance(uow, PostgresUnitOfWork)
                await uow.outbox.pending(10)
        plans = [e.plan for e in seen]
    finally:
        await factory.dispose()
    assert plans, "the outbox drain sent no query reading schedule_outbox"
    problems: list[str] = []
    used: list[list[str]] = []
    for plan in plans:
        scans = [(i, node) for rel, i, node in index_scans(plan) if rel == TABLE]
        used.append([f"{node} {i}" for i, node in scans])
        if TABLE in sequential_scans(plan):
            problems.append("sequential scan of schedule_outbox")
        if not scans or any(i != INDEX for i, _ in scans):
            problems.append(f"schedule_outbox read through {sorted({i for i, _ in scans})}")
        if sorts(plan):
            problems.append("the drain's plan sorts: the index does not give its order")
    gate_evidence.record("outbox_drain_index_access", used)
    assert problems == [], problems
