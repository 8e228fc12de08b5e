"""``rule.connection.refusal_waited_out``: a server refusing connections is waited out.

The simulator's ``refuse_connections`` fault (ADR 2220) after every write of one
materialization (``simulation.scenarios.refusal``): every connection dropped, then
5 s of virtual time in which every new connection raises asyncpg's own 57P03 "the
database system is starting up". The same scheduler worker, built through the
composition root, must wait the window out on the Clock and decide the due instant
exactly once: nothing lost, duplicated or early, no isolated error, nothing set aside
for the 60 s isolation backoff. A fault point never fired is ``not_covered``.

The test of the test: the same sweep with the outage budget off
(``REFUSAL_COUNTED``: a refusal is one of four attempts shorter than the window) must
find violations at every fault point. The shipped mutant
``faults.cannot_connect_now_not_refusing`` drops 57P03 from the classification.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.runner.pytest_plugin import GateEvidence, gate_seed
from simulation.engine import evidence, targets
from simulation.engine.errors import FaultKind
from simulation.engine.scenario import Scenario
from simulation.engine.simulator import Exploration, Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios.materialize import STEPS
from simulation.scenarios.refusal import REFUSAL, REFUSAL_COUNTED

pytestmark = pytest.mark.postgres

SEED = gate_seed(7)
KIND = FaultKind.REFUSE_CONNECTIONS


async def _sweep(
    server: DatabaseServer, template: str, tmp: Path, scenario: Scenario
) -> Exploration:
    sim = Simulator(targets.fresh_databases(server, template), store=FailureStore(tmp / "f"))
    return await sim.explore(
        scenario,
        mode="crash",
        seed=SEED,
        kinds=(KIND,),
        replay_saved=False,
    )


@pytest.mark.rule("rule.connection.refusal_waited_out")
async def test_a_refusing_server_is_waited_out_after_every_write(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    result = await _sweep(pg_server, pg_template, tmp_path, REFUSAL)
    evidence.attach_evidence(gate_evidence, result)
    expected = {f"{KIND.value}@{step}" for step in STEPS}
    unfired = sorted(expected - set(result.faults_fired))
    gate_evidence.record("fault_points", list(STEPS))
    gate_evidence.record("fault_points_unfired", unfired)
    gate_evidence.record("refusal", "57P03 CannotConnectNowError for 5 s of virtual time")
    gate_evidence.record(
        "replay", f"SCHEDULING_GATE_SEED={SEED} pytest src/gates/checks/test_rules_connection.py"
    )
    if unfired:
        gate_evidence.not_covered(f"refusals never fired: {unfired}")
    assert not result.failures, evidence.failure_report(result)


async def test_counted_refusals_are_caught(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    """Test of the test: refusals counted as attempts cannot outlast the window; the
    check must say so at every fault point."""
    result = await _sweep(pg_server, pg_template, tmp_path, REFUSAL_COUNTED)
    assert result.failures, "the check accepted a worker that gives up inside the window"
    caught = {t.step for f in result.failures for t, _ in f.phase.faults_fired}
    assert caught == set(STEPS), caught
