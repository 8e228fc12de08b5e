"""gate.schedule.materialize_atomic, facet ``durable``: the server itself crashes.

The crash sweep of the ``check`` facet injects client-side faults on a cluster with
durability off. This facet runs on a private cluster with fsync, synchronous_commit
and full_page_writes on and SIGKILLs the postmaster after every write of one
materialization (``simulation.worlds.durable``): before COMMIT nothing survives
recovery and the schedule is still due; after COMMIT the occurrence, session, run,
checkpoint and events all survive; in both cases the same objects reconnect and
leave exactly one complete occurrence. A crash that never landed makes the gate
ERROR (``not_covered``). The test of the test (a materializer that commits the
occurrence, session and run before the rest) is in
tests/integration/test_materialize_durable_sensitivity.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.worlds.durable import (
    before_commit_steps,
    crash_after_commit_keeps_everything,
    crash_before_commit_leaves_nothing,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def durable() -> Iterator[tuple[PrivateCluster, str]]:
    with private_cluster(durable=True) as private:
        yield private, migrated_template(private.server)


@pytest.mark.gate("gate.schedule.materialize_atomic", facet="durable")
async def test_server_crash_after_every_write_on_the_durable_lane(
    durable: tuple[PrivateCluster, str], gate_evidence: GateEvidence
) -> None:
    private, template = durable
    assert private.durability == {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
    }
    problems: list[str] = []
    never: list[str] = []
    for step in before_commit_steps():
        found = await crash_before_commit_leaves_nothing(private, template, step)
        never += [p for p in found if "never happened" in p]
        problems += [p for p in found if "never happened" not in p]
    found = await crash_after_commit_keeps_everything(private, template)
    never += [p for p in found if "never happened" in p]
    problems += [p for p in found if "never happened" not in p]
    gate_evidence.record("durability", private.durability)
    gate_evidence.record("crash_points", [*before_commit_steps(), "materialize.committed"])
    gate_evidence.record("server_crashes", private.crashes)
    gate_evidence.record("crash_kind", "SIGKILL of the postmaster, restart on the same port")
    if never:
        gate_evidence.not_covered(f"crashes never landed: {never}")
    assert not problems, problems
