"""gate.schedule.materialize_once and gate.schedule.materialize_atomic, under the
deterministic simulator on real PostgreSQL (scenarios in
``simulation.scenarios.materialize``).

materialize_once: two schedule workers race on one due definition; every interleaving
the exhaustive search distinguishes (sleep-set pruning over the steps' footprints) is
executed and checked, then three workers run seeded random walks. Each execution
must end with exactly one occurrence, session, run, seed checkpoint and creation-event
sequence, one worker reporting the decision and every other returning normally with
``not_due`` (an error, swallowed or not, is a violation). Each of the two workers must
have won in some interleaving. The footprints are hand-written, so the two-worker race
is explored a second time without them (no pruning at all) and must reach the same
verdicts and the same set of outcomes (who won, what each worker returned).

materialize_atomic: a crash sweep injects each fault kind (client abort, dropped
connection, terminated backend, lost COMMIT acknowledgement) after every write of one
materialization. Before commit nothing may survive and the schedule must remain due;
after commit the ledger is complete; then a retry without faults must return the one
complete linked occurrence and run. A declared step never reached makes the gate
ERROR (``not_covered``), never PASS.

The exhaustive searches are seed-independent and use a fixed seed; the random walks
and the crash sweep's discovery walk start at the gate run's seed
(``SCHEDULING_GATE_SEED``, default 7), so each gate run explores new interleavings.
The evidence records the seeds and the ``scheduling-sim run ... --seed N`` command
replaying each exploration. Replay any failure with the command the assertion prints
(``scheduling-sim replay <trace>``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gates.runner.pytest_plugin import GateEvidence, gate_profile, gate_seed
from simulation.engine import evidence, targets
from simulation.engine.checkers.violation import Violation
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld
from simulation.engine.simulator import Exploration, Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios.materialize import ATOMIC, ONCE, ONCE3, ONCE_UNPRUNED, STEPS

pytestmark = pytest.mark.postgres

EXHAUSTIVE_LIMIT = {"quick": 400, "deep": 4000}[gate_profile()]
RANDOM_SEEDS = {"quick": 12, "deep": 200}[gate_profile()]
EXHAUSTIVE_SEED = 7  # exhaustive search visits every interleaving whatever the seed
SEED = gate_seed(7)


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(
        targets.fresh_databases(server, template), store=FailureStore(tmp / "failures")
    )


Outcome = tuple[tuple[str, str, str], ...]


def recording(scenario: Scenario, outcomes: list[Outcome]) -> Scenario:
    """``scenario`` whose check also records each checked execution's outcome: per
    worker, the completion (ok / info) and the returned status."""
    check = scenario.check

    async def check_and_record(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
        found = await check(world, view)
        ops = [op for op in world.history.operations() if op.op == "materialize"]
        outcomes.append(
            tuple(
                sorted(
                    (
                        op.process,
                        op.status,
                        str(op.value.get("status") if isinstance(op.value, dict) else op.value),
                    )
                    for op in ops
                )
            )
        )
        return found

    return dataclasses.replace(scenario, check=check_and_record)


def winners_of(outcomes: list[Outcome]) -> set[str]:
    return {p for outcome in outcomes for p, status, value in outcome if value == "decided"}


def assert_explored(result: Exploration) -> None:
    assert not result.failures, evidence.failure_report(result)
    assert not result.not_covered(), result.not_covered()


@pytest.mark.gate("gate.schedule.materialize_once")
async def test_two_and_three_workers_materialize_once(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    pruned: list[Outcome] = []
    two = await sim.explore(
        recording(ONCE, pruned),
        mode="exhaustive",
        seed=EXHAUSTIVE_SEED,
        executions=EXHAUSTIVE_LIMIT,
    )
    evidence.attach_evidence(gate_evidence, two, prefix="two_workers.")
    assert_explored(two)
    assert two.exhausted, f"{EXHAUSTIVE_LIMIT} executions did not exhaust the race"
    assert two.interleavings_explored >= 2
    # Both orders happened: each worker won in at least one interleaving.
    assert winners_of(pruned) == {"a", "b"}, pruned
    gate_evidence.record("two_workers.winners", sorted(winners_of(pruned)))

    # Cross-check of the footprints: no pruning at all, same verdicts, same outcomes.
    unpruned: list[Outcome] = []
    full = await sim.explore(
        recording(ONCE_UNPRUNED, unpruned),
        mode="exhaustive",
        seed=EXHAUSTIVE_SEED,
        executions=EXHAUSTIVE_LIMIT,
    )
    evidence.attach_evidence(gate_evidence, full, prefix="unpruned.")
    assert_explored(full)
    assert full.exhausted, f"{EXHAUSTIVE_LIMIT} executions did not exhaust the unpruned race"
    assert full.counts.get("pruned", 0) == 0
    assert full.interleavings_explored >= two.interleavings_explored
    assert set(unpruned) == set(pruned), (sorted(set(unpruned)), sorted(set(pruned)))
    gate_evidence.record(
        "footprint_cross_check",
        {
            "pruned_interleavings": two.interleavings_explored,
            "pruned_away": two.counts.get("pruned", 0),
            "unpruned_interleavings": full.interleavings_explored,
            "distinct_outcomes": [list(map(list, o)) for o in sorted(set(pruned))],
            "same_verdicts_and_outcomes": True,
        },
    )

    three = await sim.explore(ONCE3, mode="random", seed=SEED, executions=RANDOM_SEEDS)
    evidence.attach_evidence(gate_evidence, three, prefix="three_workers.")
    assert_explored(three)
    gate_evidence.record("workers_raced", [2, 3])
    gate_evidence.record(
        "replay",
        [
            "scheduling-sim run --scenario materialize.once --mode exhaustive "
            f"--seed {EXHAUSTIVE_SEED} --executions {EXHAUSTIVE_LIMIT}",
            "scheduling-sim run --scenario materialize.once_unpruned --mode exhaustive "
            f"--seed {EXHAUSTIVE_SEED} --executions {EXHAUSTIVE_LIMIT}",
            f"scheduling-sim run --scenario materialize.once3 --seed {SEED} "
            f"--executions {RANDOM_SEEDS}",
        ],
    )


@pytest.mark.gate("gate.schedule.materialize_atomic", facet="check")
async def test_crash_after_every_write(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(ATOMIC, mode="crash", seed=SEED, kinds=CLIENT_FAULT_KINDS)
    evidence.attach_evidence(gate_evidence, result)
    expected = {f"{kind.value}@{step}" for kind in CLIENT_FAULT_KINDS for step in STEPS}
    fired = set(result.faults_fired)
    gate_evidence.record("crash_points_declared", list(STEPS))
    gate_evidence.record("fault_kinds", [k.value for k in CLIENT_FAULT_KINDS])
    gate_evidence.record("crash_points_unfired", sorted(expected - fired))
    gate_evidence.record(
        "replay", f"scheduling-sim run --scenario materialize.atomic --mode crash --seed {SEED}"
    )
    if expected - fired:
        gate_evidence.not_covered(f"faults never fired: {sorted(expected - fired)}")
    assert not result.failures, evidence.failure_report(result)
