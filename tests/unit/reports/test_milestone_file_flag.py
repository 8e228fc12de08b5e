"""``--milestone-file`` names the declared milestones on run, verify and merge;
``--ledger``, its name before ADR 2210, still works."""

from __future__ import annotations

from pathlib import Path

import pytest

from gates.runner.cli import _parser

COMMANDS = {
    "run": ["run"],
    "verify": ["verify", "report.json"],
    "merge": ["merge", "out", "part.json"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("flag", ["--milestone-file", "--ledger"])
def test_both_spellings_name_the_milestone_file(command: str, flag: str) -> None:
    args = _parser().parse_args([*COMMANDS[command], flag, "declared.toml"])
    assert args.milestone_file == Path("declared.toml")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_without_one_the_shipped_file_is_used(command: str) -> None:
    assert _parser().parse_args(COMMANDS[command]).milestone_file is None
