"""gate.schedule.materialize_once and gate.schedule.materialize_atomic, under the
deterministic simulator on real PostgreSQL (scenarios in
``simulation.scenarios.materialize``).

materialize_once: two schedule workers race on one due definition; every interleaving
the exhaustive search distinguishes (sleep-set pruning over the steps' footprints) is
executed and checked, then three workers run seeded random walks. Each execution
must end with exactly one occurrence, session, run, seed checkpoint and creation-event
sequence, one worker reporting the decision and the other(s) no second effect.

materialize_atomic: a crash sweep injects each fault kind (client abort, dropped
connection, terminated backend, lost COMMIT acknowledgement) after every write of one
materialization. Before commit nothing may survive and the schedule must remain due;
after commit the ledger is complete; then a retry without faults must return the one
complete linked occurrence and run. A declared step never reached makes the gate
ERROR (``not_covered``), never PASS.

Replay any failure with the command the assertion prints
(``scheduling-sim replay <trace>``); explore again with
``scheduling-sim run --scenario materialize.once --mode exhaustive --executions 400``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.pytest_plugin import GateEvidence, gate_profile
from simulation import databases, evidence
from simulation.database import DatabaseServer
from simulation.errors import FaultKind
from simulation.runner import Simulator
from simulation.scenarios.materialize import ATOMIC, ONCE, ONCE3, STEPS
from simulation.store import FailureStore

pytestmark = pytest.mark.postgres

EXHAUSTIVE_LIMIT = {"quick": 400, "deep": 4000}[gate_profile()]
RANDOM_SEEDS = {"quick": 12, "deep": 200}[gate_profile()]
SEED = 7


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(
        databases.fresh_databases(server, template), store=FailureStore(tmp / "failures")
    )


@pytest.mark.gate("gate.schedule.materialize_once")
async def test_two_and_three_workers_materialize_once(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    two = await sim.explore(ONCE, mode="exhaustive", seed=SEED, executions=EXHAUSTIVE_LIMIT)
    evidence.attach_evidence(gate_evidence, two, prefix="two_workers.")
    assert not two.failures, evidence.failure_report(two)
    three = await sim.explore(ONCE3, mode="random", seed=SEED, executions=RANDOM_SEEDS)
    evidence.attach_evidence(gate_evidence, three, prefix="three_workers.")
    assert not three.failures, evidence.failure_report(three)
    gate_evidence.record("workers_raced", [2, 3])
    gate_evidence.record(
        "replay",
        "scheduling-sim run --scenario materialize.once --mode exhaustive "
        f"--seed {SEED} --executions {EXHAUSTIVE_LIMIT}",
    )
    assert two.interleavings_explored >= 2
    # Both orders happened: each worker won at least once across the interleavings.
    assert two.reached.get("materialize.committed", 0) >= two.interleavings_explored


@pytest.mark.gate("gate.schedule.materialize_atomic")
async def test_crash_after_every_write(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    sim = _simulator(pg_server, pg_template, tmp_path)
    result = await sim.explore(ATOMIC, mode="crash", seed=SEED, kinds=tuple(FaultKind))
    evidence.attach_evidence(gate_evidence, result)
    expected = {f"{kind.value}@{step}" for kind in FaultKind for step in STEPS}
    fired = set(result.faults_fired)
    gate_evidence.record("crash_points_declared", list(STEPS))
    gate_evidence.record("fault_kinds", [k.value for k in FaultKind])
    gate_evidence.record("crash_points_unfired", sorted(expected - fired))
    gate_evidence.record(
        "replay", f"scheduling-sim run --scenario materialize.atomic --mode crash --seed {SEED}"
    )
    if expected - fired:
        gate_evidence.not_covered(f"faults never fired: {sorted(expected - fired)}")
    assert not result.failures, evidence.failure_report(result)
