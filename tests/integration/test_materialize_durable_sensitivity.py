"""Test of the test for the durable facet of materialize_atomic: a materializer that
commits the occurrence (with its session and run) in a transaction of its own before
the rest is caught by the simulator's server crash at the next write; the right one,
crashed at the same point, passes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from scheduling.service import materializer as m
from simulation.engine import targets
from simulation.engine.errors import FaultKind
from simulation.engine.faults import FaultSpec
from simulation.engine.server_crash import ServerCrash
from simulation.engine.simulator import Simulator
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.scenarios.durable import DURABLE, DURABLE_SPLIT

pytestmark = pytest.mark.postgres

CRASH = FaultSpec(m.STEP_DECIDED, FaultKind.CRASH_SERVER, "a", 1)


@pytest.fixture(scope="module")
def durable() -> Iterator[tuple[PrivateCluster, str]]:
    with private_cluster(durable=True) as private:
        yield private, migrated_template(private.server)


async def test_a_split_commit_materializer_leaves_a_partial_ledger_after_the_crash(
    durable: tuple[PrivateCluster, str],
) -> None:
    private, template = durable
    sim = Simulator(
        targets.fresh_databases(private.server, template), server=ServerCrash(private, "kill")
    )
    right = await sim.run_random(dataclasses.replace(DURABLE, faults=(CRASH,)), 3)
    assert right.status == "pass", [v.message for v in right.violations]
    wrong = await sim.run_random(dataclasses.replace(DURABLE_SPLIT, faults=(CRASH,)), 3)
    messages = [v.message for v in wrong.violations]
    assert wrong.status == "fail"
    assert any("left rows" in t and "schedule_occurrences" in t for t in messages), messages
    assert any("'runs': 1" in t for t in messages), messages
    assert private.crashes == 2


async def test_a_crash_fault_without_a_crashable_server_is_refused(
    durable: tuple[PrivateCluster, str],
) -> None:
    private, template = durable
    sim = Simulator(targets.fresh_databases(private.server, template))
    with pytest.raises(Exception, match="needs a server the simulator may crash"):
        await sim.run_random(dataclasses.replace(DURABLE, faults=(CRASH,)), 3)
