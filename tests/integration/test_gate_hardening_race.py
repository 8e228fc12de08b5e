"""Tests of the tests for gate.schedule.materialize_once (simulator on PostgreSQL).

* A losing worker that raises a SchedulingError used to be swallowed by the scenario
  (recorded as indeterminate) while ``check_once`` counted only the one decision: the
  race "passed". It must now fail (``worker.error`` and ``no_second_effect``).
* A losing worker that returns normally but with a status other than ``not_due`` (here
  RETRY) is not "no second effect" either.
* Footprints that claim every step independent prune the exhaustive search down to one
  order: the gate's each-worker-won assertion and its unpruned cross-check both see it.

The breakages are injected by patching the scenario's materializer builder or its
footprints for one test; the product is unchanged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import gates.checks.test_materialize_race as race
from scheduling.domain.errors import ConflictError
from scheduling.service.materializer import (
    MaterializeResult,
    MaterializeStatus,
    ScheduleMaterializer,
)
from simulation.engine import targets
from simulation.engine.scenario import Footprint
from simulation.engine.simulator import Exploration, Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios import materialize as scenarios

pytestmark = pytest.mark.postgres

REAL_BUILD = scenarios.build_materializer


def simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(targets.fresh_databases(server, template), store=FailureStore(tmp / "f"))


def losing_with(behaviour: str) -> Any:
    """A builder whose materializer misbehaves exactly when it loses the race."""

    class Loser(ScheduleMaterializer):
        async def materialize(self, schedule_id: Any) -> MaterializeResult:
            result = await super().materialize(schedule_id)
            if result.status is not MaterializeStatus.NOT_DUE:
                return result
            if behaviour == "raise":
                raise ConflictError("schedule.test.lost_race", "injected: the loser raises")
            return dataclasses.replace(result, status=MaterializeStatus.RETRY)

    def build(*args: Any) -> ScheduleMaterializer:
        real = REAL_BUILD(*args)
        real.__class__ = Loser
        return real

    return build


def violations(result: Exploration) -> set[str]:
    return {v.invariant for f in result.failures for v in f.violations}


async def test_a_losing_worker_that_raises_fails_the_race(
    pg_server: DatabaseServer,
    pg_template: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scenarios, "build_materializer", losing_with("raise"))
    result = await simulator(pg_server, pg_template, tmp_path).explore(
        scenarios.ONCE, mode="exhaustive", seed=race.SEED, executions=50
    )
    assert result.failures
    assert {"worker.error", "materialize.no_second_effect"} <= violations(result)
    # Every explored interleaving has a loser, so every one fails.
    assert result.counts.get("pass", 0) == 0


async def test_a_losing_worker_that_reports_retry_fails_the_race(
    pg_server: DatabaseServer,
    pg_template: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scenarios, "build_materializer", losing_with("retry"))
    result = await simulator(pg_server, pg_template, tmp_path).explore(
        scenarios.ONCE, mode="exhaustive", seed=race.SEED, executions=50
    )
    assert violations(result) == {"materialize.no_second_effect"}
    assert result.counts.get("pass", 0) == 0


async def test_over_pruning_footprints_are_caught_by_the_cross_check(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    independent = {step: Footprint.of() for step in scenarios.FOOTPRINTS}
    over_pruned = dataclasses.replace(scenarios.ONCE, footprints=independent)
    sim = simulator(pg_server, pg_template, tmp_path)
    pruned: list[race.Outcome] = []
    result = await sim.explore(
        race.recording(over_pruned, pruned), mode="exhaustive", seed=race.SEED, executions=50
    )
    assert not result.failures  # every order it did run is correct ...
    # ... but it never ran the order where the other worker wins:
    assert race.winners_of(pruned) != {"a", "b"}
    unpruned: list[race.Outcome] = []
    await sim.explore(
        race.recording(scenarios.ONCE_UNPRUNED, unpruned),
        mode="exhaustive",
        seed=race.SEED,
        executions=50,
    )
    assert set(unpruned) != set(pruned)
    assert race.winners_of(unpruned) == {"a", "b"}
