"""The overlap scenarios: registered with the CLI, replayable, and able to fail.

The test of the test injects a materializer whose overlap check is removed (it never
sees the held run as in flight): the exhaustive search of ``overlap.alone`` must find
A's instant materialized a second time, with a second run beside the held one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.materialization import FiringContext
from scheduling.ports.probe import Probe
from scheduling.service.materializer import ScheduleMaterializer
from simulation.cli import main
from simulation.engine import targets
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.provider import DatabaseServer
from simulation.scenarios import all_scenarios
from simulation.scenarios.materialize import build_materializer
from simulation.scenarios.overlap import ALONE, HELD, RELEASE, with_factory


def test_overlap_scenarios_are_listed() -> None:
    names = set(all_scenarios())
    assert {"overlap.alone", "overlap.held", "overlap.held3", "overlap.crash"} <= names


def blind_materializer(
    uow: PostgresUnitOfWorkFactory, clock: Clock, ids: IdGenerator, probe: Probe
) -> ScheduleMaterializer:
    """The mutant: the real materializer with its overlap check removed."""
    materializer = build_materializer(uow, clock, ids, probe)

    def never_in_flight(context: FiringContext) -> bool:
        return False

    materializer._in_flight = never_in_flight  # type: ignore[method-assign]
    return materializer


def _simulator(server: DatabaseServer, template: str, tmp: Path) -> Simulator:
    return Simulator(targets.fresh_databases(server, template), store=FailureStore(tmp))


@pytest.mark.postgres
async def test_overlap_scenario_catches_a_materializer_without_overlap_check(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = with_factory(ALONE, "overlap.alone_blind", blind_materializer)
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="exhaustive", executions=100
    )
    assert result.exhausted
    # Every interleaving fails: whichever worker decides, it materializes a second run.
    assert len(result.failures) == result.interleavings_explored > 0
    invariants = {v.invariant for f in result.failures for v in f.violations}
    assert {"overlap.skipped_once", "overlap.no_second_run"} <= invariants


@pytest.mark.postgres
async def test_with_b_the_mutant_is_caught_by_random_walks_too(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = with_factory(HELD, "overlap.held_blind", blind_materializer)
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="random", seed=3, executions=2
    )
    assert len(result.failures) == 2
    assert all(
        "overlap.no_second_run" in {v.invariant for v in f.violations} for f in result.failures
    )


@pytest.mark.postgres
def test_cli_runs_and_replays_an_overlap_trace(
    pg_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "held.json"
    code = main(
        ["run", "--scenario", "overlap.held", "--seed", "5", "--trace", str(trace), "--no-store"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "materialize.decision_written[A]" in out
    assert main(["replay", str(trace)]) == 0
    assert capsys.readouterr().out.count("identical, byte for byte") == 2


@pytest.mark.postgres
async def test_release_scenario_catches_the_mutant_while_the_run_is_in_flight(
    pg_server: DatabaseServer, pg_template: str, tmp_path: Path
) -> None:
    mutant = with_factory(RELEASE, "overlap.release_blind", blind_materializer)
    result = await _simulator(pg_server, pg_template, tmp_path).explore(
        mutant, mode="random", seed=1, executions=6
    )
    assert result.failures, "the blind materializer was not caught"
    invariants = {v.invariant for f in result.failures for v in f.violations}
    assert "linearizable" in invariants
