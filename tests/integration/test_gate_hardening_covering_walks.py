"""Tests of the tests for the covering walks (issue 10) of gate.schedule.lifecycle and
gate.schedule.no_overlap (simulator on PostgreSQL).

* A seeded walk that misses a declared step (found by search, not assumed) still makes
  the unchanged guard report it: alone, and with a covering walk in an order that does
  not reach the step.
* The gate's covering orders reach every declared step on their own, for any seed, so
  the guard is met by construction.
"""

from __future__ import annotations

import pytest

from gates.checks import test_lifecycle as lifecycle_check
from gates.checks import test_no_overlap as overlap_check
from gates.checks.covering_walks import combined, covering_walks, in_order
from gates.runner.pytest_plugin import GateEvidence, GateNotCovered
from simulation.engine import evidence, targets
from simulation.engine.scenario import Scenario
from simulation.engine.simulator import Exploration, Simulator
from simulation.provider import DatabaseServer
from simulation.scenarios.lifecycle import RACE
from simulation.scenarios.overlap import RELEASE

pytestmark = pytest.mark.postgres

RESUMED = "service.resume.mutated"
QUEUED_A = "materialize.admission_locked[A]"  # only A's materialization reaches it


def _sim(server: DatabaseServer, template: str) -> Simulator:
    return Simulator(targets.fresh_databases(server, template), store=None)


async def _walk_missing(sim: Simulator, scenario: Scenario, step: str) -> Exploration:
    """The first single seeded walk (seeds 0..59) that does not reach ``step``."""
    for seed in range(60):
        walk = await sim.explore(
            scenario, mode="random", seed=seed, executions=1, replay_saved=False
        )
        if step not in walk.reached:
            return walk
    raise AssertionError(f"every walk of {scenario.name} reached {step}")


def _guard(exploration: Exploration) -> str | None:
    """What the gate's guard says about ``exploration`` (None: covered)."""
    try:
        evidence.attach_evidence(GateEvidence(), exploration)
    except GateNotCovered as exc:
        return str(exc)
    return None


def test_in_order_gives_each_task_the_turn_until_it_finishes() -> None:
    guide = in_order(("scan", "b"))
    assert guide[0] == "scan"
    assert guide[-1] == "b"
    assert guide.index("b") == len(guide) // 2


async def test_lifecycle_guard_reports_a_walk_that_never_resumed(
    pg_server: DatabaseServer, pg_template: str
) -> None:
    sim = _sim(pg_server, pg_template)
    walk = await _walk_missing(sim, RACE, RESUMED)
    none = await covering_walks(sim, walk, ())
    reason = _guard(combined(walk, none))
    assert reason is not None
    assert f"step {RESUMED} never reached" in reason
    # An order that cancels first never pauses, resumes or materializes.
    wrong = await covering_walks(sim, walk, [("a", "b", "scan", "stale")])
    reason = _guard(combined(walk, wrong))
    assert reason is not None
    assert f"step {RESUMED} never reached" in reason


async def test_lifecycle_covering_order_reaches_every_step(
    pg_server: DatabaseServer, pg_template: str
) -> None:
    sim = _sim(pg_server, pg_template)
    walk = await _walk_missing(sim, RACE, RESUMED)
    walks = await covering_walks(sim, walk, lifecycle_check.RACE_ORDERS)
    assert walks.not_covered() == []  # on their own, whatever the seeded walk did
    assert walks.failures == []
    assert _guard(combined(walk, walks)) is None


async def test_release_guard_reports_a_walk_that_never_queued_a_new_run(
    pg_server: DatabaseServer, pg_template: str
) -> None:
    sim = _sim(pg_server, pg_template)
    walk = await _walk_missing(sim, RELEASE, QUEUED_A)
    assert _guard(combined(walk, await covering_walks(sim, walk, ()))) is not None
    late = await covering_walks(sim, walk, [("a", "b", "runner")])
    reason = _guard(combined(walk, late))
    assert reason is not None
    assert f"step {QUEUED_A} never reached" in reason
    walks = await covering_walks(sim, walk, overlap_check.RELEASE_ORDERS)
    assert walks.not_covered() == []
    assert walks.failures == []
    assert _guard(combined(walk, walks)) is None


def test_combined_keeps_both_explorations_counts() -> None:
    a = Exploration(RACE, "random", 3, counts={"pass": 2}, reached={"x": 1}, seeds=[3, 4])
    b = Exploration(RACE, "covering", 3, counts={"pass": 1}, reached={"x": 2, "y": 1})
    both = combined(a, b)
    assert both.counts == {"pass": 3}
    assert both.reached == {"x": 3, "y": 1}
    assert both.seeds == [3, 4]
    assert both.mode == "random+covering"
