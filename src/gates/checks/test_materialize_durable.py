"""gate.schedule.materialize_atomic, facet ``durable``: the server itself crashes.

The crash sweep of the ``check`` facet injects client-side faults on a cluster with
durability off. This facet runs the simulator's ``crash_server`` fault kind
(``simulation.scenarios.durable``) on a private cluster with fsync,
synchronous_commit and full_page_writes on: a crash sweep SIGKILLs the postmaster
after every write of one materialization, restarts it, and reads what survived crash
recovery before any task moves. Before COMMIT nothing survives and the schedule is
still due; after COMMIT the occurrence, session, run, checkpoint and events all
survive; in both cases the same worker object reconnects, continues and decides the
instant exactly once. A crash point never fired makes the gate ERROR
(``not_covered``). The test of the test (a materializer that commits the occurrence,
session and run before the rest) is in
tests/integration/test_materialize_durable_sensitivity.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gates.runner.pytest_plugin import GateEvidence, gate_seed
from simulation.engine import evidence, targets
from simulation.engine.errors import FaultKind
from simulation.engine.server_crash import ServerCrash
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.scenarios.durable import DURABLE
from simulation.scenarios.materialize import STEPS

pytestmark = pytest.mark.postgres

SEED = gate_seed(7)


@pytest.fixture(scope="module")
def durable() -> Iterator[tuple[PrivateCluster, str]]:
    with private_cluster(durable=True) as private:
        yield private, migrated_template(private.server)


@pytest.mark.gate("gate.schedule.materialize_atomic", facet="durable")
async def test_server_crash_after_every_write_on_the_durable_lane(
    durable: tuple[PrivateCluster, str], gate_evidence: GateEvidence, tmp_path: Path
) -> None:
    private, template = durable
    assert private.durability == {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
    }
    crashes_before = private.crashes
    sim = Simulator(
        targets.fresh_databases(private.server, template),
        store=FailureStore(tmp_path / "failures"),
        server=ServerCrash(private, "kill"),
    )
    result = await sim.explore(
        DURABLE, mode="crash", seed=SEED, kinds=(FaultKind.CRASH_SERVER,), replay_saved=False
    )
    evidence.attach_evidence(gate_evidence, result)
    expected = {f"{FaultKind.CRASH_SERVER.value}@{step}" for step in STEPS}
    unfired = sorted(expected - set(result.faults_fired))
    gate_evidence.record("durability", private.durability)
    gate_evidence.record("crash_points", list(STEPS))
    gate_evidence.record("crash_points_unfired", unfired)
    gate_evidence.record("server_crashes", private.crashes - crashes_before)
    gate_evidence.record("crash_kind", "SIGKILL of the postmaster, restart on the same port")
    gate_evidence.record(
        "replay",
        f"SCHEDULING_GATE_SEED={SEED} pytest src/gates/checks/test_materialize_durable.py",
    )
    if unfired or private.crashes - crashes_before < len(STEPS):
        gate_evidence.not_covered(f"server crashes never fired: {unfired}")
    assert not result.failures, evidence.failure_report(result)
