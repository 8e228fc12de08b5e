"""gate.schedule.no_overlap on PostgreSQL: under the deterministic simulator, and with
real concurrent schedule workers.

Under the simulator (scenarios in ``simulation.scenarios.overlap``): A's run is held
leased RUNNING across A's next due instant, and real ``ScheduleWorker`` passes scan
concurrently, parked at every materializer write (steps labelled with their schedule,
``materialize.locked[A]``). Every interleaving of two workers on A is explored
exhaustively (``overlap.alone``); two and three workers with B due at the same
instant run seeded random walks (``overlap.held``, ``overlap.held3``: the two schedules'
transactions commute, so an exhaustive search of them mostly re-orders independent
steps); and a crash sweep injects every fault kind after every write of the skip
transaction (``overlap.crash``), then rescans without faults. In ``overlap.release`` the
held run is QUEUED and the real run worker finishes it at an interleaved point: A's
instant is decided once, consistently with when the run ended (linearizability
against a two-operation model). Every execution must end
with A's instant recorded once as SKIPPED_OVERLAP, no second run, the held run row
unchanged, and B materialized once. A declared step never reached, or a planned fault
never fired, makes the gate ERROR. The exhaustive search is seed-independent (fixed
seed); the random walks and the crash sweep's discovery walk start at the gate run's
seed (``SCHEDULING_GATE_SEED``, default 7) and the evidence records each
exploration's seeds and its ``scheduling-sim run ... --seed N`` replay command.

With real concurrency (below):

Schedule A fires and its run is held non-terminal (QUEUED, then leased RUNNING) across
A's next due instant. Two schedule workers then scan concurrently: A's instant is
recorded exactly once as SKIPPED_OVERLAP (reason ``schedule.materialize.overlap``),
no second run or session exists, A's run row is byte-for-byte unchanged and A's
failure count unchanged, while schedule B, due at the same instant, materializes.
Still in flight at A's third instant, it is skipped again (the latest occurrence is
then the skip, which has no run: what counts is the latest MATERIALIZED one). Once A's
run is terminal, A's following instant materializes again; that second run held in
flight makes the next instant a skip too (the latest MATERIALIZED occurrence, not the
first).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gates.checks.covering_walks import combined, covering_walks, walk_evidence
from gates.runner.pytest_plugin import GateEvidence, gate_profile, gate_seed
from scheduling.service.materializer import OVERLAP, STEP_ADMISSION
from simulation.engine import evidence, targets
from simulation.engine.checkers import check_ledger
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios.overlap import (
    ALONE,
    CRASH,
    HELD,
    HELD3,
    RELEASE,
    SKIP_STEPS,
    labelled,
)
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.no_overlap"
EXHAUSTIVE_SEED = 7  # exhaustive search visits every interleaving whatever the seed
SEED = gate_seed(7)
EXHAUSTIVE_LIMIT = {"quick": 200, "deep": 2000}[gate_profile()]
RANDOM_SEEDS = {"quick": (6, 6), "deep": (100, 100)}[gate_profile()]
RELEASE_SEEDS = {"quick": 10, "deep": 200}[gate_profile()]
# The run worker finishes first (A MATERIALIZED with a new run), or last (SKIPPED_OVERLAP).
RELEASE_ORDERS = (("runner", "a", "b"), ("a", "b", "runner"))


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(
        targets.fresh_databases(server, template), store=FailureStore(tmp / "failures")
    )


@pytest.mark.gate(GATE)
async def test_overlap_skip_in_every_interleaving(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    alone = await sim.explore(
        ALONE, mode="exhaustive", seed=EXHAUSTIVE_SEED, executions=EXHAUSTIVE_LIMIT
    )
    evidence.attach_evidence(gate_evidence, alone, prefix="two_workers_exhaustive.")
    assert not alone.failures, evidence.failure_report(alone)
    two_seeds, three_seeds = RANDOM_SEEDS
    two = await sim.explore(HELD, mode="random", seed=SEED, executions=two_seeds)
    evidence.attach_evidence(gate_evidence, two, prefix="two_workers_with_b.")
    assert not two.failures, evidence.failure_report(two)
    three = await sim.explore(HELD3, mode="random", seed=SEED, executions=three_seeds)
    evidence.attach_evidence(gate_evidence, three, prefix="three_workers_with_b.")
    assert not three.failures, evidence.failure_report(three)
    gate_evidence.record("workers_raced", [2, 2, 3])
    gate_evidence.record(
        "replay",
        [
            "scheduling-sim run --scenario overlap.alone --mode exhaustive "
            f"--seed {EXHAUSTIVE_SEED} --executions {EXHAUSTIVE_LIMIT}",
            f"scheduling-sim run --scenario overlap.held --seed {SEED} --executions {two_seeds}",
            f"scheduling-sim run --scenario overlap.held3 --seed {SEED} --executions {three_seeds}",
        ],
    )
    if not alone.exhausted:
        gate_evidence.not_covered(f"overlap.alone not exhausted in {EXHAUSTIVE_LIMIT} executions")
    assert alone.interleavings_explored >= 2
    # B passed the overlap check (only a materialization reaches admission) in every
    # checked execution with B.
    assert three.reached.get(labelled(STEP_ADMISSION, "B"), 0) >= three_seeds


@pytest.mark.gate(GATE)
async def test_one_decision_while_the_run_worker_finishes_the_run(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    """The held run is QUEUED and the real run worker claims and finishes it while two
    schedule workers scan: A's instant is decided once, SKIPPED_OVERLAP if the decision
    linearizes before the run ended and MATERIALIZED (with its one new run) after."""
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(RELEASE, mode="random", seed=SEED, executions=RELEASE_SEEDS)
    # A's new run is queued only if the run finished before the decision (about 3 walks
    # in 5): covering walks take both orders in every run, whatever the seed.
    walks = await covering_walks(sim, result, RELEASE_ORDERS)
    gate_evidence.record("release.covering_walks", walk_evidence(walks, RELEASE_ORDERS))
    evidence.attach_evidence(gate_evidence, combined(result, walks), prefix="release.")
    gate_evidence.record(
        "release.replay",
        f"scheduling-sim run --scenario overlap.release --seed {SEED} --executions {RELEASE_SEEDS}",
    )
    assert not result.failures, evidence.failure_report(result)
    assert not walks.failures, evidence.failure_report(walks)


@pytest.mark.gate(GATE)
async def test_overlap_skip_survives_a_crash_after_every_write(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(CRASH, mode="crash", seed=SEED, kinds=CLIENT_FAULT_KINDS)
    evidence.attach_evidence(gate_evidence, result, prefix="crash.")
    points = [labelled(step, "A") for step in SKIP_STEPS]
    expected = {f"{kind.value}@{step}" for kind in CLIENT_FAULT_KINDS for step in points}
    unfired = sorted(expected - set(result.faults_fired))
    gate_evidence.record("crash.points_declared", points)
    gate_evidence.record("crash.points_unfired", unfired)
    gate_evidence.record(
        "crash.replay", f"scheduling-sim run --scenario overlap.crash --mode crash --seed {SEED}"
    )
    if unfired:
        gate_evidence.not_covered(f"faults never fired: {unfired}")
    assert not result.failures, evidence.failure_report(result)


async def fire_next(h: MaterializeWorld, sid: Any) -> None:
    """Advance to the schedule's next instant and scan once."""
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    await h.worker(h.materializer()).run_once()


def dispositions(ledger: Any, sid: Any) -> list[str]:
    return [o["disposition"] for o in ledger.of(sid).occurrences]


@pytest.mark.gate("gate.schedule.no_overlap")
async def test_next_instant_skipped_while_run_in_flight(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        a = await h.create(title="A")
        first = await h.next_fire(a)
        h.clock.advance_to(first + timedelta(seconds=1))
        assert (await h.worker(h.materializer()).run_once()).scanned == [a]
        run = (await h.ledger()).of(a).runs[0]
        # B first fires at A's second instant.
        h.clock.advance_to(first + timedelta(hours=2))
        b = await h.create(title="B", key="b")
        second = await h.next_fire(a)
        assert await h.next_fire(b) == second
        await h.sql(
            "UPDATE runs SET status = 'RUNNING', lease_owner = 'w1', lease_expires_at = :t,"
            " fencing_token = 1 WHERE id = :i",
            t=second + timedelta(days=30),
            i=run["id"],
        )
        held = (await h.sql("SELECT * FROM runs WHERE id = :i", i=run["id"]))[0]
        h.clock.advance_to(second + timedelta(seconds=2))
        workers = [h.worker(h.materializer()), h.worker(h.materializer())]
        reports = await asyncio.gather(*(w.run_once() for w in workers))
        ledger = await h.ledger()
        a_ledger, b_ledger = ledger.of(a), ledger.of(b)
        a_occ = {o["nominal_fire_at"]: o for o in a_ledger.occurrences}
        assert a_occ[second]["disposition"] == "SKIPPED_OVERLAP"
        assert a_occ[second]["reason_code"] == OVERLAP
        assert a_occ[second]["run_id"] is None
        assert len(a_ledger.runs) == len(a_ledger.sessions) == 1
        assert (await h.sql("SELECT * FROM runs WHERE id = :i", i=run["id"]))[0] == held
        assert a_ledger.event_types().count("schedule.occurrence.skipped_overlap") == 1
        assert (await h.schedule(a))["consecutive_failures"] == 0
        assert [o["disposition"] for o in b_ledger.occurrences] == ["MATERIALIZED"]
        assert len(b_ledger.runs) == 1
        # Still in flight at A's third instant: skipped again. The latest occurrence is
        # now the skip, which has no run; what counts is the latest MATERIALIZED one.
        await fire_next(h, a)
        assert dispositions(await h.ledger(), a) == ["MATERIALIZED", *["SKIPPED_OVERLAP"] * 2]
        assert len((await h.ledger()).of(a).runs) == 1
        # The in-flight run ends; A's next instant materializes.
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', lease_owner = NULL, lease_expires_at = NULL,"
            " finished_at = :t WHERE id = :i",
            t=h.clock.now(),
            i=run["id"],
        )
        await fire_next(h, a)
        # That second run is in flight at the next instant: skipped, though the first
        # MATERIALIZED occurrence's run has ended (the latest one counts, not the first).
        runs = (await h.ledger()).of(a).runs
        assert len(runs) == 2, runs
        (later,) = [r for r in runs if r["id"] != run["id"]]
        await h.sql(
            "UPDATE runs SET status = 'RUNNING', lease_owner = 'w1', lease_expires_at = :t,"
            " fencing_token = 1 WHERE id = :i",
            t=h.clock.now() + timedelta(days=30),
            i=later["id"],
        )
        await fire_next(h, a)
        final = (await h.ledger()).of(a)
        assert dispositions(await h.ledger(), a) == [
            "MATERIALIZED",
            "SKIPPED_OVERLAP",
            "SKIPPED_OVERLAP",
            "MATERIALIZED",
            "SKIPPED_OVERLAP",
        ]
        assert len(final.runs) == 2
        everything = await h.ledger()
        assert check_ledger(everything.occurrences, everything.runs, everything.sessions) == []
        gate_evidence.record("workers_raced", len(workers))
        gate_evidence.record("decisions_per_worker", [len(r.results) for r in reports])
        gate_evidence.record("schedule_a", [o["disposition"] for o in final.occurrences])
        gate_evidence.record("schedule_b", [o["disposition"] for o in b_ledger.occurrences])
        gate_evidence.record("held_run_status", "RUNNING (leased) across the next instant")
    finally:
        await h.close()
