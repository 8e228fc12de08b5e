"""gate.schedule.lifecycle_linear: lifecycle races are linearized.

Under the deterministic simulator (scenarios in ``simulation.scenarios.lifecycle``):
update, pause, resume and cancel with current and stale revisions, and a due scan that
materializes, run as simulated workers through the real service and materializer on
PostgreSQL, parked at every named write (``service.<op>.<write>``, ``materialize.*``)
and interleaved by the seeded scheduler (``lifecycle.race``, seeded random walks). A
crash sweep (``lifecycle.crash``) injects faults after every service write of
pause, resume and cancel: a crashed operation is indeterminate and the checker accepts
either outcome. Each execution's history (the simulator's recorder) must be
linearizable per schedule against ``LifecycleModel``; CANCELLED must never reopen and a
resume must never backfill. The evidence lists seeds, interleavings explored, steps
reached (a declared step never reached makes the gate ERROR), faults fired and the
``scheduling-sim run ... --seed N`` command replaying each exploration. The random walks
and the crash sweep's discovery walk start at the gate run's seed
(``SCHEDULING_GATE_SEED``; default 1), so each gate run explores new interleavings.

Besides, Hypothesis generates histories: two schedules, then batches of update, pause, resume,
cancel and due-scan operations with current, stale (-1) and ahead (+1) expected
revisions; each batch runs concurrently against real PostgreSQL (the service through
the API role; the scan - the repository's ``due(now, limit)`` read followed by
``ScheduleMaterializer.materialize`` for each due schedule, as the schedule worker does -
through the scheduler role). Between batches the virtual clock jumps, sometimes to just
after the earliest next firing so that scans materialize, skip for overlap or miss.
Each schedule's sub-history must be linearizable (the simulator's Wing & Gong checker,
``simulation.engine.checkers.check_linearizable_per_key``) against ``LifecycleModel``: the
spec's closed transitions plus the cached next firing, the scan and its decisions. So
every history is equivalent to one allowed serial order; CANCELLED never reopens; and
paused time never backfills. Admission is the development allow-all controller (tenant
admission has its own gates); runs are never executed, so they stay in flight.

Reproduce: ``SCHEDULING_GATE_SEED=<seed> .venv/bin/pytest src/gates/checks/test_lifecycle.py``
(the seed is printed on failure and recorded in the evidence).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from sqlalchemy import text

from gates.checks.covering_walks import combined, covering_walks, walk_evidence
from gates.runner.pytest_plugin import GateEvidence, gate_profile, gate_seed
from scheduling.bootstrap import build_scheduler
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.recurrence.engine import next_after
from scheduling.service.values import ScheduleResult
from scheduling.testing import PostgresUnitOfWorkFactory, open_storage
from simulation.engine import evidence, targets
from simulation.engine.checkers import check_linearizable_per_key
from simulation.engine.errors import FaultKind
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios.lifecycle import CRASH, CRASH_POINTS, RACE
from simulation.worlds.lifecycle import (
    LIFECYCLE_OPS,
    HistoryDriver,
    Op,
)
from simulation.worlds.materialize import WHO as MATERIALIZE_WHO
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import (
    build_world,
    definition,
    principal,
    scheduler_settings,
    seed_durable,
)

GATE = "gate.schedule.lifecycle_linear"
SEED = gate_seed(20261130)
EXAMPLES = {"quick": 25, "deep": 400}[gate_profile()]
SCHEDULES = 2
WHO = principal("linear")

SIM_SEED = gate_seed(1)
SIM_SEEDS = {"quick": 20, "deep": 400}[gate_profile()]
# Quick: a client abort and a lost COMMIT acknowledgement (the indeterminate case); the
# deep profile adds the dropped connection and the terminated backend (measured: all
# four kinds take about 20 s on the loaded 2-core box, over the quick budget).
CRASH_KINDS = {
    "quick": (FaultKind.RAISE, FaultKind.LOSE_COMMIT_ACK),
    "deep": CLIENT_FAULT_KINDS,
}[gate_profile()]
# A scan, then pause and resume, then update and cancel, then the stale writes: each
# task whole, so every declared step of lifecycle.race is reached.
RACE_ORDERS = (("scan", "b", "a", "stale"),)


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(
        targets.fresh_databases(server, template), store=FailureStore(tmp / "failures")
    )


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_lifecycle_races_linearize_under_the_simulator(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(RACE, mode="random", seed=SIM_SEED, executions=SIM_SEEDS)
    # The resume writes happen only if the pause committed first (about 1 walk in 8):
    # a covering walk reaches every declared step in every run, whatever the seed.
    walks = await covering_walks(sim, result, RACE_ORDERS)
    gate_evidence.record("race.covering_walks", walk_evidence(walks, RACE_ORDERS))
    evidence.attach_evidence(gate_evidence, combined(result, walks), prefix="race.")
    gate_evidence.record("race.workers", sorted(RACE.workers))
    gate_evidence.record(
        "race.replay",
        f"scheduling-sim run --scenario lifecycle.race --seed {SIM_SEED} --executions {SIM_SEEDS}",
    )
    assert not result.failures, evidence.failure_report(result)
    assert not walks.failures, evidence.failure_report(walks)
    assert result.interleavings_explored == SIM_SEEDS


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_lifecycle_crashes_are_indeterminate_not_wrong(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(CRASH, mode="crash", seed=SIM_SEED, kinds=CRASH_KINDS)
    evidence.attach_evidence(gate_evidence, result, prefix="crash.")
    expected = {f"{kind.value}@{step}" for kind in CRASH_KINDS for step in CRASH_POINTS}
    unfired = sorted(expected - set(result.faults_fired))
    gate_evidence.record("crash.points_declared", list(CRASH_POINTS))
    gate_evidence.record("crash.fault_kinds", [k.value for k in CRASH_KINDS])
    gate_evidence.record("crash.points_unfired", unfired)
    gate_evidence.record(
        "crash.replay",
        f"scheduling-sim run --scenario lifecycle.crash --mode crash --seed {SIM_SEED}"
        f" --kinds {','.join(k.value for k in CRASH_KINDS)}",
    )
    if unfired:
        gate_evidence.not_covered(f"faults never fired: {unfired}")
    assert not result.failures, evidence.failure_report(result)


ops = st.one_of(
    st.builds(
        Op,
        kind=st.sampled_from(LIFECYCLE_OPS),
        target=st.integers(0, SCHEDULES - 1),
        offset=st.sampled_from((0, 0, 0, -1, 1)),
        cadence=st.integers(0, 2),
    ),
    st.builds(Op, kind=st.just("due"), target=st.just(0)),
)
# Between batches: jump by seconds, or to just after the earliest next firing.
advances = st.one_of(
    st.tuples(st.just("jump"), st.integers(0, 40 * 3600)),
    st.tuples(st.just("fire"), st.integers(0, 1200)),
)
batches = st.lists(
    st.tuples(st.lists(ops, min_size=2, max_size=6), advances),
    min_size=2,
    max_size=6,
)


class Tally:
    def __init__(self) -> None:
        self.examples = 0
        self.operations: dict[str, int] = {}
        self.outcomes: dict[str, int] = {}
        self.concurrent_batches = 0
        self.dispositions: dict[str, int] = {}


Plan = list[tuple[list[Op], tuple[str, int]]]


async def run_example(url: str, plan: Plan, number: int, tally: Tally) -> None:
    storage = open_storage(url, pool_size=8)
    admin = storage.factory("trusted")
    try:
        scheduler = storage.as_role("scheduler")
        if number == 0:
            await seed_durable(admin, [WHO])
        world = build_world(storage, seed=SEED * 1000 + number)
        # The development allow-all controller: this gate is the state machine's, and
        # admission would only add refusals the lifecycle model does not describe.
        materializer = build_scheduler(
            scheduler_settings(AGENT_SCHEDULE_ADMISSION="allow_all"),
            clock=world.clock,
            ids=world.ids.fork("materializer"),
            storage=storage,
        ).materializer
        driver = HistoryDriver(world, scheduler, WHO, materializer)
        await driver.create(SCHEDULES, prefix=f"x{number}")
        for batch, advance in plan:
            await driver.batch(batch)
            tally.concurrent_batches += len(batch) > 1
            await advance_clock(driver, advance)
        violations = check_linearizable_per_key(
            driver.history, driver.model_for, key=lambda op: op.args["schedule"]
        )
        for op in driver.history.operations():
            tally.operations[op.op] = tally.operations.get(op.op, 0) + 1
            verdict = op.value[0] if isinstance(op.value, tuple) else str(op.value)
            if op.op == "materialize" and verdict == "decided":
                tally.dispositions[op.value[1]] = tally.dispositions.get(op.value[1], 0) + 1
            tally.outcomes[f"{op.op}:{verdict}"] = tally.outcomes.get(f"{op.op}:{verdict}", 0) + 1
        problems = [f"{v.invariant}: {v.message} {dict(v.details)}" for v in violations]
        problems += await direct_checks(admin, driver)
        if problems:
            raise AssertionError(
                f"seed={SEED} (reproduce: SCHEDULING_GATE_SEED={SEED} .venv/bin/pytest "
                "src/gates/checks/test_lifecycle.py)\n"
                + "\n".join(problems)
                + "\nhistory:\n"
                + json.dumps(driver.history.as_json(), indent=1)
            )
    finally:
        await storage.close()


async def advance_clock(driver: HistoryDriver, advance: tuple[str, int]) -> None:
    mode, seconds = advance
    clock = driver.world.clock
    if mode == "fire":
        fires = []
        for sid in driver.schedules:
            fire = (await driver.world.service.get(driver.who, sid)).schedule.next_fire_at
            if fire is not None and fire > clock.now():
                fires.append(fire)
        if fires:
            clock.advance_to(min(fires))
    clock.advance(seconds)


async def direct_checks(admin: PostgresUnitOfWorkFactory, driver: HistoryDriver) -> list[str]:
    """Independent of the model: a schedule once seen CANCELLED is CANCELLED at the end,
    and every resumed event fires strictly after its own time, at the cadence's first
    instant after it (no backfill)."""
    problems = []
    by_id = {sid: k for k, sid in enumerate(driver.schedules)}
    async with admin.engine.connect() as conn:
        states: dict[Any, str] = {
            row[0]: row[1]
            for row in (
                await conn.execute(
                    text("SELECT id, state FROM schedules WHERE id = ANY(:ids)"),
                    {"ids": driver.schedules},
                )
            ).all()
        }
        resumed = (
            await conn.execute(
                text(
                    "SELECT e.schedule_id, e.payload, r.definition FROM process_events e"
                    " JOIN schedule_revisions r ON r.schedule_id = e.schedule_id"
                    " AND r.revision = (e.payload->>'revision')::int"
                    " WHERE e.event_type = 'schedule.resumed' AND e.schedule_id = ANY(:ids)"
                ),
                {"ids": driver.schedules},
            )
        ).all()
    for op in driver.history.operations():
        value: Any = op.value
        if isinstance(value, tuple) and value[:2] == ("ok", "CANCELLED"):
            sid = driver.schedules[op.args["schedule"]]
            if states[sid] != "CANCELLED":
                problems.append(f"schedule {op.args['schedule']} reopened after {op.op_id}")
    for sid, payload, revision_definition in resumed:
        at, fire = payload["occurred_at"], payload["next_fire_at"]
        cadence = revision_definition["cadence"]
        resumed_at = datetime.fromisoformat(at)
        expected = next_after(parse_cadence(cadence), resumed_at)
        strictly_later = expected is not None and expected > resumed_at
        if not strictly_later or expected is None or fire != format_instant(expected):
            problems.append(f"schedule {by_id[sid]} resumed at {at} fires at {fire} (backfill?)")
    return problems


@pytest.mark.postgres
@pytest.mark.gate(GATE)
def test_lifecycle_histories_are_linearizable(pg_url: str, gate_evidence: GateEvidence) -> None:
    tally = Tally()
    counter = itertools.count()

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(plan=batches)
    def check(plan: Plan) -> None:
        tally.examples += 1
        asyncio.run(run_example(pg_url, plan, next(counter), tally))

    check()
    gate_evidence.record("seed", SEED)
    gate_evidence.record("examples", tally.examples)
    gate_evidence.record("concurrent_batches", tally.concurrent_batches)
    gate_evidence.record("operations", tally.operations)
    gate_evidence.record("outcomes", dict(sorted(tally.outcomes.items())))
    gate_evidence.record("dispositions", dict(sorted(tally.dispositions.items())))
    gate_evidence.record(
        "checker", "simulation.engine.checkers.check_linearizable_per_key (Wing & Gong)"
    )
    gate_evidence.record(
        "due_scan",
        "ScheduleRepository.due(now, limit) then ScheduleMaterializer.materialize per due id "
        "(allow-all admission; runs never executed)",
    )
    gate_evidence.record("database", "postgresql: API role (service), scheduler role (due scan)")
    gate_evidence.record(
        "reproduce",
        f"SCHEDULING_GATE_SEED={SEED} .venv/bin/pytest src/gates/checks/test_lifecycle.py",
    )
    assert tally.outcomes.get("update:conflict", 0) > 0
    assert tally.outcomes.get("pause:ok", 0) > 0
    assert tally.outcomes.get("resume:ok", 0) > 0
    assert tally.outcomes.get("cancel:ok", 0) > 0
    assert tally.outcomes.get("materialize:decided", 0) > 0
    assert tally.outcomes.get("due:True", 0) > 0


WEEKLY = {"kind": "WEEKLY", "local_time": "07:30", "weekdays": [2, 4], "timezone": "UTC"}


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_one_serial_history_keeps_every_state_rule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """One serial history through the service, each step's answer and row checked
    against the spec's state rules (the generated histories never send a revision
    below 1, never read pause_reason and rarely resume after a paused edit):
    expected_revision 0 is an invalid value, never a stale one; a stale revision is a
    conflict carrying the current revision and changes nothing; a paused edit stays
    PAUSED with the user's pause reason and no next firing; the later resume, days on,
    fires at the new cadence's first instant strictly after the resume (no backfill),
    and the scan at that moment decides nothing."""
    h = await MaterializeWorld.open(pg_url)
    service, who = h.world.service, MATERIALIZE_WHO
    try:
        sid = await h.create()
        calls: dict[str, Callable[[int], Awaitable[ScheduleResult]]] = {
            "pause": lambda revision: service.pause(who, sid, revision),
            "resume": lambda revision: service.resume(who, sid, revision),
            "cancel": lambda revision: service.cancel(who, sid, revision),
            "update": lambda revision: service.update(who, sid, revision, definition(title="U")),
        }
        for name, call in calls.items():
            with pytest.raises(ValidationError) as invalid:
                await call(0)
            assert invalid.value.code == "schedule.lifecycle.invalid_expected_revision", name
        h.clock.advance(60)
        await service.update(who, sid, 1, definition(title="Second"))
        row = await h.schedule(sid)
        for name, call in calls.items():
            with pytest.raises(ConflictError) as stale:
                await call(1)
            assert stale.value.code == "schedule.lifecycle.stale_revision", name
            assert stale.value.details.get("current_revision") == 2, name
        assert await h.schedule(sid) == row
        h.clock.advance(60)
        await service.pause(who, sid, 2)
        h.clock.advance(60)
        edited = await service.update(who, sid, 2, definition(title="Weekly", cadence=WEEKLY))
        assert edited.schedule.current_revision == 3
        paused = await h.schedule(sid)
        assert paused["state"] == "PAUSED"
        assert paused["pause_reason"] == "user"
        assert paused["next_fire_at"] is None
        # Ten days paused: every daily and weekly instant in between stays unfired.
        h.clock.advance(10 * 86_400 + 3_600)
        resumed_at = h.clock.now()
        resumed = await service.resume(who, sid, 3)
        expected = next_after(parse_cadence(WEEKLY), resumed_at)
        assert expected is not None
        assert resumed.schedule.next_fire_at == expected
        assert (await h.schedule(sid))["next_fire_at"] == expected
        await h.scan()
        assert (await h.ledger()).of(sid).occurrences == []
        gate_evidence.record(
            "serial_history",
            {"resumed_at": format_instant(resumed_at), "next_fire_at": format_instant(expected)},
        )
    finally:
        await h.close()


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_resume_starts_a_fresh_failure_count(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The model's serial order (ADR 0600): two consecutive MISSED instants auto-pause a
    schedule whose max_consecutive_failures is 2; a resume starts the count at zero, so
    the next single miss leaves it ACTIVE with one failure (a resume that kept the count
    would pause it again on that first miss)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        late = timedelta(seconds=definition().misfire_grace_seconds + 60)
        for _ in range(2):
            h.clock.advance_to(await h.next_fire(sid) + late)
            await h.scan()
        paused = await h.schedule(sid)
        assert paused["state"] == "PAUSED"
        assert paused["pause_reason"] == "failure_limit"
        await h.world.service.resume(MATERIALIZE_WHO, sid, paused["current_revision"])
        assert (await h.schedule(sid))["consecutive_failures"] == 0
        h.clock.advance_to(await h.next_fire(sid) + late)
        await h.scan()
        after = await h.schedule(sid)
        assert after["state"] == "ACTIVE"
        assert after["consecutive_failures"] == 1
        dispositions = [o["disposition"] for o in (await h.ledger()).of(sid).occurrences]
        assert dispositions == ["MISSED", "MISSED", "MISSED"]
        gate_evidence.record("failures_after_resume_and_one_miss", after["consecutive_failures"])
    finally:
        await h.close()
