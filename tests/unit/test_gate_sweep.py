"""The seed sweep's verdict: identical statuses pass; a gate whose status moves with the
seed fails the sweep, is tabled seed x gate, and each odd seed gets its replay command."""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from gates.runner import RunOptions, cli
from gates.runner.sweep import SweepOutcome, choose_seeds, cmd_sweep, replay_command, sweep, table
from reports.model import GateStatus

CIVIL = "gate.schedule.civil_time"
CALENDAR = "gate.schedule.calendar_recurrence"


@dataclass
class FakeGate:
    id: str
    status: GateStatus
    selected: bool = True


@dataclass
class FakeReport:
    gates: list[FakeGate]


def fake_runner(by_seed: dict[int, dict[str, GateStatus]], seen: list[RunOptions]) -> object:
    def run(options: RunOptions) -> tuple[FakeReport, int]:
        seen.append(options)
        assert options.seed is not None
        statuses = by_seed[options.seed]
        gates = [FakeGate(g, s) for g, s in statuses.items()]
        gates.append(FakeGate("gate.schedule.unselected", GateStatus.NOT_RUN, selected=False))
        return FakeReport(gates), 0

    return run


def _args(tmp_path: Path, seeds: int, seed_list: str) -> argparse.Namespace:
    parser = cli._parser()
    return parser.parse_args(
        [
            *("sweep", "--seeds", str(seeds), "--seed-list", seed_list),
            *("--output", str(tmp_path), "--gate", CIVIL, "--gate", CALENDAR),
        ]
    )


def test_identical_statuses_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = {CIVIL: GateStatus.PASS, CALENDAR: GateStatus.PASS}
    seen: list[RunOptions] = []
    code = cmd_sweep(_args(tmp_path, 3, "1,2,3"), fake_runner({1: same, 2: same, 3: same}, seen))  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert code == 0
    assert "identical statuses for all 3 seeds (2 gates: PASS 2)" in out
    assert [o.seed for o in seen] == [1, 2, 3]
    assert [o.output for o in seen] == [tmp_path / f"seed-{s}" for s in (1, 2, 3)]
    assert all(o.gates == [CIVIL, CALENDAR] for o in seen)
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["identical"] is True
    assert saved["differing_gates"] == []


def test_a_status_that_moves_with_the_seed_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {CIVIL: GateStatus.PASS, CALENDAR: GateStatus.PASS}
    bad = {CIVIL: GateStatus.ERROR, CALENDAR: GateStatus.PASS}
    runner = fake_runner({7: good, 1: bad, 9: good}, [])
    code = cmd_sweep(_args(tmp_path, 3, "7,1,9"), runner)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert code == 1
    assert "civil_time" in out
    assert "calendar_recurrence" not in out.split("(*")[0]  # only differing gates tabled
    assert "1           ERROR*" in out
    assert f"replay seed 1: scheduling-gates run --gate {CIVIL} --seed 1" in out
    saved = json.loads((tmp_path / "sweep.json").read_text())
    assert saved["differing_gates"] == [CIVIL]
    assert saved["odd_seeds"] == {"1": [CIVIL]}


def test_a_gate_missing_from_one_seed_counts_as_differing() -> None:
    both = {CIVIL: "PASS", CALENDAR: "PASS"}
    outcome = SweepOutcome(statuses={1: {CIVIL: "PASS"}, 2: both, 3: both})
    assert outcome.differing() == [CALENDAR]
    assert outcome.odd_seeds() == {1: [CALENDAR]}
    assert "ABSENT*" in table(outcome)


def test_seeds_listed_first_then_fresh_and_distinct() -> None:
    seeds = choose_seeds(6, [1, 20261130, 1, 455213441], random.Random(0))
    assert seeds[:3] == [1, 20261130, 455213441]
    assert len(seeds) == len(set(seeds)) == 6
    assert choose_seeds(2, [5, 6, 7], random.Random(0)) == [5, 6, 7]


def test_each_seed_gets_its_own_run(tmp_path: Path) -> None:
    seen: list[RunOptions] = []
    same = {CIVIL: GateStatus.PASS}
    template = RunOptions(checks_dir=tmp_path, output=tmp_path / "out", profile="deep")
    outcome = sweep([4, 5], template, fake_runner({4: same, 5: same}, seen), lambda _: None)  # type: ignore[arg-type]
    assert outcome.statuses == {4: {CIVIL: "PASS"}, 5: {CIVIL: "PASS"}}
    assert [(o.seed, o.profile) for o in seen] == [(4, "deep"), (5, "deep")]
    assert template.seed is None  # the template is not changed


def test_replay_command_names_the_gates_seed_and_profile() -> None:
    assert replay_command(3, [CIVIL], "deep") == (
        f"scheduling-gates run --gate {CIVIL} --seed 3 --profile deep"
    )
