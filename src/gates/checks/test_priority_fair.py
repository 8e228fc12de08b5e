"""gate.schedule.priority_fair: scheduled load cannot starve interactive work.

Real PostgreSQL, two run workers with three claim loops each (six loops for four fleet
slots), driven on one virtual clock by ``Autojump`` (every wait is a clock sleep, so
latencies are measured in virtual seconds and do not depend on the machine).

The async load is scheduled load: ten daily schedules due at one instant, materialized
by the materializer (scheduler role) into priority-10 runs. Phase A saturates async
capacity with them (they fill every slot async work may use) while short interactive
runs (priority 0, submitted on demand) arrive one by one. Every interactive
claim latency (claim instant - ``scheduled_for``) must stay within the configured bound
(``Topology.interactive_claim_bound_seconds``, the product setting
``AGENT_SCHEDULE_INTERACTIVE_CLAIM_BOUND_SECONDS``, read from the topology the check
builds its fleet capacity from).
Phase B floods interactive work: async work must keep progressing, i.e. the longest
stretch with no async run holding a slot stays within the same bound. The fleet caps
(total, async <= total - interactive reserve, interactive <= total - async reserve) must
hold at every instant. Claim instants come from the durable ``run.started`` events.

The same scenario without reserves (``QueueCapacity(4, 0, 0)``) must violate both
bounds: that run is the check's own proof that it can fail.

The caps also hold when two claims race for the last async slot: the second claim,
started while the first is inside its transaction, finds the slot taken once the first
commits (``queue.claims_without_queue_lock`` is the test of that test).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from gates.runner.pytest_plugin import GateEvidence
from scheduling.bootstrap import build_run_worker
from scheduling.config import Topology
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.runtime import WorkerSettings
from scheduling.testing import (
    ConfiguredTenantConfiguration,
    PostgresUnitOfWorkFactory,
    storage_over,
)
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import (
    UNACCOUNTED,
    Autojump,
    run_worker,
    submission,
    submitter,
)
from simulation.worlds.service import (
    CEILINGS,
    START,
    principal,
    seed_durable,
    world_settings,
)

GATE = "gate.schedule.priority_fair"
SETTINGS = WorkerSettings(lease_seconds=120, heartbeat_seconds=40, poll_seconds=5)
# The deployment's capacity settings, claim bound included (its default: two idle polls
# of these workers).
TOPOLOGY = Topology(total_slots=4, interactive_reserved_slots=1, async_reserved_slots=1)
CAPACITY = QueueCapacity(
    total_slots=TOPOLOGY.total_slots,
    interactive_reserved=TOPOLOGY.interactive_reserved_slots,
    async_reserved=TOPOLOGY.async_reserved_slots,
)
UNRESERVED = QueueCapacity(
    total_slots=TOPOLOGY.total_slots, interactive_reserved=0, async_reserved=0
)
WORKERS = ("w1", "w2")
SLOTS_PER_WORKER = 3
ASYNC_BACKLOG = 10
ASYNC_SECONDS = 240
PHASE_A = [10 + 45 * i for i in range(5)]  # short interactive runs, one at a time
PHASE_A_SECONDS = 30
PHASE_B_AT = 260
PHASE_B_RUNS = 6
PHASE_B_SECONDS = 240
STOP_AT = 800


@dataclass
class Interval:
    run_id: str
    priority: int
    submitted: datetime
    claimed: datetime
    finished: datetime | None
    phase: str


@dataclass
class Report:
    capacity: QueueCapacity
    intervals: list[Interval]
    async_claimed: int
    jumps: int
    violations: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def concurrency(intervals: list[Interval], end: datetime) -> list[tuple[datetime, int, int]]:
    """(instant, interactive, async) after every claim or finish (finishes first)."""
    marks: list[tuple[datetime, int, int]] = []
    for i in intervals:
        cls = 0 if i.priority == int(RunPriority.INTERACTIVE) else 1
        marks.append((i.claimed, 1, cls))
        marks.append((i.finished or end, 0, cls))
    marks.sort(key=lambda m: (m[0], m[1]))
    counts = [0, 0]
    series = []
    for at, start, cls in marks:
        counts[cls] += 1 if start else -1
        series.append((at, counts[0], counts[1]))
    return series


def evaluate(report: Report, start: datetime, bound: float) -> None:
    """Fill ``report.violations`` and ``report.figures`` (the gate's statement, with
    ``bound`` the configured claim bound in seconds)."""
    cap = report.capacity
    # No crash happens here, so every run is claimed at most once (SKIP LOCKED + lock).
    ids = [i.run_id for i in report.intervals]
    if len(ids) != len(set(ids)):
        report.violations.append("a run was claimed twice")
    end = max((i.finished or i.claimed) for i in report.intervals)
    series = concurrency(report.intervals, end)
    for at, inter, asy in series:
        if (
            inter + asy > cap.total_slots
            or asy > cap.total_slots - cap.interactive_reserved
            or inter > cap.total_slots - cap.async_reserved
        ):
            report.violations.append(f"fleet cap broken at {at.isoformat()}: {inter}+{asy}")
    phase_a = [i for i in report.intervals if i.phase == "A"]
    latencies = [seconds(i.submitted, i.claimed) for i in phase_a]
    report.figures["phase_a_interactive_claims"] = len(phase_a)
    report.figures["phase_a_latency_seconds"] = latencies
    report.figures["phase_a_latency_max_seconds"] = max(latencies) if latencies else None
    if len(phase_a) < len(PHASE_A):
        report.violations.append(f"only {len(phase_a)} of {len(PHASE_A)} phase-A runs claimed")
    over = [x for x in latencies if x > bound]
    if over:
        report.violations.append(f"interactive claim latency above {bound}s: {over}")
    # Saturation: at each phase-A submission async work held every slot it may use.
    async_at_submit = []
    for i in phase_a:
        before = [s for s in series if s[0] <= i.submitted]
        async_at_submit.append(before[-1][2] if before else 0)
    report.figures["async_running_at_each_interactive_submit"] = async_at_submit
    allowed_async = cap.total_slots - cap.interactive_reserved
    if not async_at_submit or min(async_at_submit) < allowed_async:
        report.violations.append(
            f"async capacity was not saturated in phase A ({async_at_submit}, cap {allowed_async})"
        )
    # Phase B: the longest stretch with no async run holding a slot, while flooded.
    flood = [i for i in report.intervals if i.phase == "B"]
    b_start = start + timedelta(seconds=PHASE_B_AT)
    b_end = max((i.claimed for i in flood), default=b_start)
    report.figures["phase_b_window_seconds"] = seconds(b_start, b_end)
    gap, idle_since = 0.0, None
    for at, _, asy in [s for s in series if b_start <= s[0] <= b_end]:
        if asy == 0 and idle_since is None:
            idle_since = at
        elif asy > 0 and idle_since is not None:
            gap, idle_since = max(gap, seconds(idle_since, at)), None
    if idle_since is not None:
        gap = max(gap, seconds(idle_since, b_end))
    async_claims_b = [
        i for i in report.intervals if i.priority != 0 and b_start <= i.claimed <= b_end
    ]
    report.figures["phase_b_async_claims"] = len(async_claims_b)
    report.figures["phase_b_longest_async_gap_seconds"] = gap
    if not async_claims_b or gap > bound:
        report.violations.append(
            f"async work stalled under the interactive flood: {len(async_claims_b)} claims, "
            f"longest gap {gap}s"
        )


async def scheduled_backlog(h: MaterializeWorld) -> list[str]:
    """``ASYNC_BACKLOG`` daily schedules due at one instant, materialized by the
    scheduler into priority-10 runs (the tenant's active-run ceiling is raised so
    admission admits them all)."""
    h.tenants = ConfiguredTenantConfiguration(
        default=CEILINGS.model_copy(update={"max_active_runs": 100})
    )
    ids = [
        await h.create(
            key=f"load-{n}",
            instruction=f"Scheduled load. [script:run_long:{ASYNC_SECONDS}]",
            run_timeout_seconds=3600,
        )
        for n in range(ASYNC_BACKLOG)
    ]
    fire = (await h.sql("SELECT max(next_fire_at) AS f FROM schedules"))[0]["f"]
    h.clock.advance_to(fire)
    materializer = h.materializer()
    runs = []
    for sid in ids:
        made = await materializer.materialize(sid)
        assert made.run_id is not None, made
        runs.append(str(made.run_id))
    rows = await h.sql("SELECT DISTINCT priority FROM runs")
    assert [r["priority"] for r in rows] == [10]
    return runs


async def scenario(url: str, capacity: QueueCapacity) -> tuple[Report, datetime]:
    h = await MaterializeWorld.open(url)
    try:
        clock: VirtualClock = h.clock
        backlog = await scheduled_backlog(h)
        t0 = clock.now()
        phase: dict[str, str] = dict.fromkeys(backlog, "backlog")
        submit = submitter(h.admin, clock)
        driver = Autojump(clock)
        stop = asyncio.Event()

        async def until(offset: float) -> None:
            await clock.sleep(seconds(clock.now(), t0 + timedelta(seconds=offset)))

        async def submitter_task() -> None:
            for at in PHASE_A:
                await until(at)
                run = await submit.submit(WHO, submission(f"run_long:{PHASE_A_SECONDS}"))
                phase[str(run.id)] = "A"
            await until(PHASE_B_AT)
            for _ in range(PHASE_B_RUNS):
                run = await submit.submit(WHO, submission(f"run_long:{PHASE_B_SECONDS}"))
                phase[str(run.id)] = "B"
            await until(STOP_AT)
            stop.set()

        workers = [
            run_worker(h.admin, clock, name, capacity=capacity, settings=SETTINGS)
            for name in WORKERS
        ]
        tasks = [driver.spawn(submitter_task())]
        # Each claim loop is its own participant of the clock driver (see Autojump).
        tasks += [driver.spawn(w.slot(stop)) for w in workers for _ in range(SLOTS_PER_WORKER)]
        try:
            await driver.drive(tasks)
        finally:
            driver.detach()
        intervals = await read_intervals(h.admin, phase)
        async_claimed = sum(1 for i in intervals if i.phase == "backlog")
        return Report(capacity, intervals, async_claimed, driver.jumps), t0
    finally:
        await h.close()


async def read_intervals(admin: PostgresUnitOfWorkFactory, phase: dict[str, str]) -> list[Interval]:
    async with admin.engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT r.id, r.priority, r.scheduled_for, r.finished_at, e.occurred_at"
                    " FROM runs r JOIN session_events e ON e.run_id = r.id"
                    " AND e.event_type = 'run.started' ORDER BY e.occurred_at, r.id"
                )
            )
        ).all()
    return [
        Interval(
            str(r.id), r.priority, r.scheduled_for, r.occurred_at, r.finished_at, phase[str(r.id)]
        )
        for r in rows
    ]


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_reserved_slots_keep_interactive_latency_and_async_progress(
    pg_server: Any, pg_template: str, gate_evidence: GateEvidence
) -> None:
    urls = [pg_server.create_database(template=pg_template) for _ in range(2)]
    try:
        reserved, t0 = await scenario(urls[0], CAPACITY.require_reserves())
        control, c0 = await scenario(urls[1], UNRESERVED)
    finally:
        for url in urls:
            pg_server.drop_database(url)
    bound = TOPOLOGY.interactive_claim_bound_seconds
    evaluate(reserved, t0, bound)
    evaluate(control, c0, bound)
    gate_evidence.record("workers", list(WORKERS))
    gate_evidence.record("claim_loops", len(WORKERS) * SLOTS_PER_WORKER)
    gate_evidence.record(
        "capacity",
        {
            "total": CAPACITY.total_slots,
            "interactive_reserved": CAPACITY.interactive_reserved,
            "async_reserved": CAPACITY.async_reserved,
        },
    )
    gate_evidence.record("interactive_claim_bound_virtual_seconds", bound)
    gate_evidence.record("claim_bound_setting", "Topology.interactive_claim_bound_seconds")
    gate_evidence.record("async_load", f"{ASYNC_BACKLOG} materialized scheduled runs")
    gate_evidence.record("claims", len(reserved.intervals))
    gate_evidence.record("async_runs_claimed", reserved.async_claimed)
    gate_evidence.record("clock_jumps", reserved.jumps)
    gate_evidence.record("figures", reserved.figures)
    gate_evidence.record(
        "control_without_reserves", {"figures": control.figures, "violations": control.violations}
    )
    assert not reserved.violations, reserved.violations
    # The check can fail: without reserves both halves of the statement are violated.
    assert any("latency" in v for v in control.violations), control.violations
    assert any("stalled" in v for v in control.violations), control.violations


# ------------------------------------------------------- claims racing for one slot

RACER = principal("racer", scopes=set())
ONE_ASYNC_SLOT = QueueCapacity(total_slots=2, interactive_reserved=1, async_reserved=1)
"""Async work may hold one slot of two."""


async def waiters(admin: PostgresUnitOfWorkFactory, at_least: int) -> None:
    """Until ``at_least`` sessions of this database wait on a lock (real time, bounded)."""
    for _ in range(600):
        async with admin.engine.connect() as conn:
            waiting = (
                await conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND datname = current_database()"
                    )
                )
            ).scalar_one()
        if waiting >= at_least:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} claim(s) ever waited on a lock")


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_two_claims_at_once_never_pass_the_async_cap(pg_url: str) -> None:
    """Two async workers claim at the same moment with one async slot free and two async
    runs queued. The first claim is caught inside its transaction, after it set its run
    RUNNING and before its COMMIT (the check holds the checkpoint table locked, which
    the claim reads last); the second claim starts then. It must find the slot taken
    once the first commits: one run claimed, the other still QUEUED. A claim that
    counted the live leases without serializing with the first (it cannot see the
    first's uncommitted claim) would take the second run: two async runs where the
    fleet admits one."""
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=6)
    clock = VirtualClock(START)
    try:
        await seed_durable(admin, [RACER])
        submit = submitter(admin, clock, seed=4)
        for _ in range(2):
            await submit.submit(RACER, submission("succeed", priority=RunPriority.ASYNC))
        clock.advance(1)
        queues = [
            build_run_worker(
                world_settings(),
                RunPriority.ASYNC,
                clock=clock,
                ids=SeededIds(0).fork(f"racer-{n}"),
                storage=storage_over(admin),
                capacity=ONE_ASYNC_SLOT,
                owner=f"racer-{n}",
                worker_settings=SETTINGS,
                on_finished=UNACCOUNTED,
            ).queue
            for n in range(2)
        ]
        async with admin.engine.connect() as blocker:
            held = await blocker.begin()
            await blocker.execute(text("LOCK TABLE run_checkpoints IN ACCESS EXCLUSIVE MODE"))
            first = asyncio.ensure_future(queues[0].claim("racer-0", clock.now(), 120))
            await waiters(admin, 1)
            second = asyncio.ensure_future(queues[1].claim("racer-1", clock.now(), 120))
            await waiters(admin, 2)
            await held.rollback()
        claims = [await first, await second]
        async with admin.engine.connect() as conn:
            statuses = sorted((await conn.execute(text("SELECT status FROM runs"))).scalars().all())
        assert claims[0] is not None
        assert claims[1] is None, f"a second async run claimed past the cap: {claims[1]}"
        assert statuses == ["QUEUED", "RUNNING"], statuses
    finally:
        await admin.dispose()
