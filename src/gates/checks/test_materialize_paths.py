"""gate.schedule.materialize_atomic, facet ``check``: the decisions that write no run.

``test_materialize_race`` sweeps the MATERIALIZED transaction. This sweeps the other
write paths (scenarios in ``simulation.scenarios.materialize_paths``): MISSED beyond
grace with five instants coalesced, AUTHORIZATION_FAILED (principal disabled; scope
revoked), CONFIGURATION_FAILED (pinned agent version deleted, two instants coalesced).
A fault after every step of each path (the lock, the decision's one statement of
occurrence, schedule advance, audit events and outcome row (ADR 2330), COMMIT) must
leave either nothing or the whole decision; a retry decides it exactly once.

Fault kinds: the deep profile fires every kind after every step. The quick profile
fires one kind per step, rotated by the gate seed, when a path has at least as many
steps as there are kinds; these paths have three steps and four kinds, so both
profiles fire every kind after every step; ``scheduling-sim run --scenario <name>
--mode crash --seed N`` replays the full product. A declared step never reached
or a planned fault never fired is ``not_covered`` (ERROR), never PASS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.runner.pytest_plugin import GateEvidence, gate_profile, gate_seed
from simulation.engine import evidence, targets
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import Scenario
from simulation.engine.simulator import Exploration, Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios.materialize_paths import NO_RUN_STEPS, PATH_SCENARIOS

pytestmark = pytest.mark.postgres

SEED = gate_seed(7)
EVERY_KIND = gate_profile() == "deep"


async def crash_sweep(
    sim: Simulator, scenario: Scenario, seed: int, *, every_kind: bool = EVERY_KIND
) -> Exploration:
    """One discovery walk, then a fault after each step it reached: every client kind
    (deep), or one kind per step rotated by the seed (quick) if the steps are enough
    for the rotation to meet every kind."""
    steps = scenario.eligible_fault_steps
    return await sim.explore(
        scenario,
        mode="crash",
        seed=seed,
        kinds=CLIENT_FAULT_KINDS,
        rotate_kinds=not every_kind and len(steps) >= len(CLIENT_FAULT_KINDS),
        replay_saved=False,
    )


def simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(
        targets.fresh_databases(server, template), store=FailureStore(tmp / "failures")
    )


@pytest.mark.gate("gate.schedule.materialize_atomic", facet="check")
@pytest.mark.parametrize("path", sorted(PATH_SCENARIOS))
async def test_crash_after_every_write_of_a_decision_without_a_run(
    pg_server: DatabaseServer,
    pg_template: str,
    tmp_path: Path,
    gate_evidence: GateEvidence,
    path: str,
) -> None:
    scenario = PATH_SCENARIOS[path]
    result = await crash_sweep(simulator(pg_server, pg_template, tmp_path), scenario, SEED)
    evidence.attach_evidence(gate_evidence, result, prefix=f"{path}.")
    fired = {label.split("@", 1)[1] for label in result.faults_fired}
    kinds = {label.split("@", 1)[0] for label in result.faults_fired}
    gate_evidence.record(f"{path}.crash_points_declared", list(NO_RUN_STEPS))
    gate_evidence.record(f"{path}.fault_kinds_fired", sorted(kinds))
    replay = f"scheduling-sim run --scenario {scenario.name} --mode crash --seed {SEED}"
    gate_evidence.record(f"{path}.replay", replay)
    unfired = sorted(set(NO_RUN_STEPS) - fired)
    if unfired or len(kinds) < len(CLIENT_FAULT_KINDS):
        gate_evidence.not_covered(f"{path}: steps without a fault {unfired}, kinds {sorted(kinds)}")
    assert not result.failures, evidence.failure_report(result)
