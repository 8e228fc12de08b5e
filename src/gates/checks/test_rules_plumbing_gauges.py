"""The scrape-time gauges of the scheduler's and run worker's metrics ports, read through
each role's own unit of work as production builds them (``PostgresStorage``'s
``scheduler_gauges`` and ``run_gauges``), against rows written here with known instants.

``rule.metrics.run_worker`` - "active scheduled runs by tenant" and "daily and monthly
scheduled cost against tenant ceilings": per tenant, the active gauge counts exactly
the scheduled runs QUEUED or RUNNING (no ended one, no on-demand one); the daily and
monthly cost are the cost of exactly the tenant's scheduled runs inside the rolling
day and the rolling 30 days (ADR 0801's month, the one admission charges): a run an
hour old counts in both, one three days old and one 29 days 22 hours old only in the
month, one 30 days 1 hour old in neither, and an on-demand run's cost in neither;
each tenant's windows hold only its own runs; the ceilings are the configured daily
and monthly ones, each under its own window. (Every run here is created and finished
on the same side of each window edge, so the figures do not depend on which of the
two instants a window reads.)

``rule.metrics.scheduler`` - "due schedules": the due gauge counts an ACTIVE schedule
whose next_fire_at is exactly now (due at its instant) and not one a microsecond
later.

The cost beside a ceiling is admission's committed cost: runs that ended inside the
window, whenever they were created, and no running run's partial cost (checked against
``tenant_usage``, the read admission makes).

Tests of the test: ``scheduling-gates mutate`` (``gauges.cost_by_creation``,
``plumbing.gauge_month_31_days``,
``plumbing.gauge_cost_counts_on_demand``, ``plumbing.gauge_ceiling_windows_swapped``,
``plumbing.gauge_active_running_only``, ``plumbing.gauge_due_strict``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from gates.checks.persistence_support import ALICE, MALLORY, T0, PersistenceWorld, seeded_world
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.records import RunRecord, RunStatus
from scheduling.testing import PostgresUnitOfWorkFactory, open_storage, tenant_usage
from simulation.engine.clock import VirtualClock

pytestmark = pytest.mark.postgres

NOW = T0 + timedelta(days=40)
CEILINGS = TenantCeilings(
    max_run_timeout_seconds=3600,
    max_misfire_grace_seconds=3600,
    max_steps=100,
    max_model_calls=100,
    max_tool_calls=100,
    max_cost_per_run=Decimal(10),
    max_active_runs=5,
    max_materializations_per_minute=60,
    max_daily_cost=Decimal(70),
    max_monthly_cost=Decimal(900),
)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def _run(
    world: PersistenceWorld,
    template: RunRecord,
    *,
    status: RunStatus,
    age: timedelta,
    cost: str,
    scheduled: bool = True,
) -> RunRecord:
    """A run of ``template``'s owner and session, created ``age`` before NOW and (when
    ended) finished ten minutes after its creation, both on the same side of any
    window edge used here."""
    created = NOW - age
    ended = status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
    metadata: dict[str, Any] = {}
    if scheduled:
        metadata = {"schedule_id": str(world.uuid()), "occurrence_id": str(world.uuid())}
    return replace(
        template,
        id=world.uuid(),
        status=status,
        created_at=created,
        updated_at=created,
        scheduled_for=created,
        finished_at=created + timedelta(minutes=10) if ended else None,
        cost=Decimal(cost),
        metadata=metadata,
    )


@pytest.mark.rule("rule.metrics.run_worker")
async def test_the_run_gauges_count_each_tenants_scheduled_runs_in_each_window(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    world = await seeded_world(pg_url)
    a, b = world.of(ALICE).run, world.of(MALLORY).run
    runs = [
        # tenant-a, scheduled
        _run(world, a, status=RunStatus.COMPLETED, age=HOUR, cost="1"),
        _run(world, a, status=RunStatus.FAILED, age=3 * DAY, cost="2"),
        _run(world, a, status=RunStatus.COMPLETED, age=30 * DAY - 2 * HOUR, cost="4"),
        _run(world, a, status=RunStatus.COMPLETED, age=30 * DAY + HOUR, cost="8"),
        _run(world, a, status=RunStatus.QUEUED, age=timedelta(minutes=3), cost="0"),
        _run(world, a, status=RunStatus.RUNNING, age=timedelta(minutes=2), cost="0"),
        _run(world, a, status=RunStatus.CANCELLED, age=2 * HOUR, cost="0"),
        # tenant-a, on demand: in no scheduled figure
        _run(world, a, status=RunStatus.COMPLETED, age=HOUR, cost="16", scheduled=False),
        _run(world, a, status=RunStatus.QUEUED, age=HOUR, cost="0", scheduled=False),
        # tenant-b, scheduled
        _run(world, b, status=RunStatus.COMPLETED, age=HOUR, cost="32"),
        _run(world, b, status=RunStatus.COMPLETED, age=10 * DAY, cost="64"),
    ]
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with admin.begin() as uow:
            for run in runs:
                await uow.runs.create(run)
            await uow.commit()
    finally:
        await admin.dispose()
    storage = open_storage(pg_url, pool_size=2)
    try:
        gauges = storage.run_gauges(VirtualClock(NOW), CEILINGS, "run_worker")
        assert gauges is not None
        state = await gauges.scheduled_runs()
    finally:
        await storage.close()
    assert state.active == {"tenant-a": 2}, state.active
    expected_cost = {
        ("tenant-a", "daily"): Decimal(1),
        ("tenant-a", "monthly"): Decimal(1 + 2 + 4),
        ("tenant-b", "daily"): Decimal(32),
        ("tenant-b", "monthly"): Decimal(32 + 64),
    }
    assert {k: Decimal(v) for k, v in state.cost.items()} == expected_cost, state.cost
    expected_ceiling = {
        (tenant, window): amount
        for tenant in ("tenant-a", "tenant-b")
        for window, amount in (("daily", Decimal(70)), ("monthly", Decimal(900)))
    }
    assert dict(state.ceiling) == expected_ceiling, state.ceiling
    gate_evidence.record("active", state.active)
    gate_evidence.record("cost", {f"{t}/{w}": str(v) for (t, w), v in state.cost.items()})


@pytest.mark.rule("rule.metrics.scheduler")
async def test_the_due_gauge_counts_a_schedule_due_at_this_instant(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    world = await seeded_world(pg_url)
    # Every seeded schedule is ACTIVE and next fires at T0 + 1 day.
    due_at = world.of(ALICE).schedule.next_fire_at
    assert due_at is not None
    storage = open_storage(pg_url, pool_size=2)
    try:
        counts = {}
        for label, at in (
            ("a microsecond before", due_at - timedelta(microseconds=1)),
            ("at the instant", due_at),
        ):
            gauges = storage.scheduler_gauges(VirtualClock(at), "scheduler")
            assert gauges is not None
            counts[label] = await gauges.due_schedules()
    finally:
        await storage.close()
    assert counts == {"a microsecond before": 0, "at the instant": 3}, counts
    gate_evidence.record("due", counts)


@pytest.mark.rule("rule.metrics.run_worker")
async def test_the_cost_gauges_read_what_admission_charges_the_ceilings_with(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """ "Daily and monthly scheduled cost against tenant ceilings": the figure beside a
    ceiling is the committed cost admission charges it with, the cost of scheduled runs
    that ended inside the window. A run created 25 hours ago that ended 23 hours ago
    counts in the day; one created 31 days ago that ended 29 days ago counts in the
    month; a RUNNING run's partial cost counts in neither (admission reserves its
    max_cost instead). A gauge that selects by creation shows 0 for the day and leaves
    the month's run out (``gauges.cost_by_creation``)."""
    world = await seeded_world(pg_url)
    a = world.of(ALICE).run
    spans = [
        (RunStatus.COMPLETED, 25 * HOUR, 23 * HOUR, "5"),
        (RunStatus.FAILED, 31 * DAY, 29 * DAY, "7"),
        (RunStatus.RUNNING, HOUR, None, "3"),
    ]
    runs = []
    for status, created_ago, ended_ago, cost in spans:
        run = _run(world, a, status=status, age=created_ago, cost=cost)
        ended = None if ended_ago is None else NOW - ended_ago
        runs.append(replace(run, finished_at=ended, updated_at=ended or run.updated_at))
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with admin.begin() as uow:
            for run in runs:
                await uow.runs.create(run)
            await uow.commit()
        async with admin.begin() as uow:
            usage = await tenant_usage(uow, "tenant-a", NOW)
    finally:
        await admin.dispose()
    storage = open_storage(pg_url, pool_size=2)
    try:
        gauges = storage.run_gauges(VirtualClock(NOW), CEILINGS, "run_worker")
        assert gauges is not None
        state = await gauges.scheduled_runs()
    finally:
        await storage.close()
    daily = Decimal(state.cost.get(("tenant-a", "daily"), 0))
    monthly = Decimal(state.cost.get(("tenant-a", "monthly"), 0))
    assert (daily, monthly) == (Decimal(5), Decimal(12)), state.cost
    assert (daily, monthly) == (usage.daily_committed_cost, usage.monthly_committed_cost), usage
    gate_evidence.record("committed_cost", {"daily": str(daily), "monthly": str(monthly)})
