"""``scheduling-sim`` end to end on the provider's PostgreSQL: the demonstration."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulation.cli import main


def test_list_names_each_scenario_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split("\t")[0] for line in lines]
    assert "demo.read_then_insert" in names
    assert "demo.read_then_insert_unique" in names


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).with_name("scheduling-sim")
    out = subprocess.run([str(script), "list"], capture_output=True, text=True, check=True)
    names = [line.split("\t")[0] for line in out.stdout.splitlines()]
    assert "demo.read_then_insert" in names


@pytest.mark.postgres
def test_exhaustive_run_prints_a_replay_that_reproduces_byte_for_byte(
    pg_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "failures"
    trace = tmp_path / "dup.json"
    code = main(
        [
            "run", "--scenario", "demo.read_then_insert", "--mode", "exhaustive",
            "--store", str(store), "--trace", str(trace),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "inserted 2 times" in out
    assert f"replay with: scheduling-sim replay {trace}" in out
    assert main(["replay", str(trace)]) == 0
    out = capsys.readouterr().out
    assert out.count("identical, byte for byte") == 2
    assert "checked: determinism" in out
    assert "--expect-pass" in out  # a failing outcome is pointed out, not silently OK
    assert main(["replay", str(trace), "--expect-pass"]) == 1
    assert "checked: --expect-pass: FAILED" in capsys.readouterr().out
    assert main(["shrink", str(trace), "--output", str(tmp_path / "short.json")]) == 0
    out = capsys.readouterr().out
    match = re.search(r"shrunk a (\d+)-decision order to a (\d+)-entry guide", out)
    assert match is not None
    assert int(match.group(2)) < int(match.group(1))
    assert main(["replay", str(tmp_path / "short.json")]) == 0


@pytest.mark.postgres
def test_unique_variant_passes_every_interleaving(
    pg_server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run", "--scenario", "demo.read_then_insert_unique", "--mode", "exhaustive",
            "--store", str(tmp_path), "--trace", str(tmp_path / "last.json"),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "exhausted" in out
    # The trace written for a passing run is one that ran to the end: it replays.
    assert main(["replay", str(tmp_path / "last.json"), "--expect-pass"]) == 0
    assert "checked: --expect-pass: passed" in capsys.readouterr().out
    assert "'fail'" not in out
