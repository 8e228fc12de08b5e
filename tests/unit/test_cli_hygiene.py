"""The three console scripts behave like good tools (issue 15): one test per rule.

Run as subprocesses through the installed scripts, the way a user or CI meets them.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gates.runner.cli import _parser as gates_parser
from scheduling import console
from scheduling.cli import build_parser as product_parser
from simulation.cli import _parser as sim_parser

BIN = Path(sys.executable).parent
SCRIPTS = ("scheduling", "scheduling-gates", "scheduling-sim")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.mark.parametrize("script", SCRIPTS)
def test_version(script: str) -> None:
    proc = _run(script, "--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"{script} ")
    assert proc.stdout.split()[1][0].isdigit()


@pytest.mark.parametrize(
    "argv", [("scheduling-gates", "list"), ("scheduling-sim", "list"), ("scheduling", "--help")]
)
def test_a_closed_pipe_ends_quietly(argv: tuple[str, ...]) -> None:
    """`cmd | head -1` where head has gone: no BrokenPipeError traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE, deterministically
    try:
        proc = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in proc.stderr
    assert proc.stderr == ""
    # argparse's --help exits 0 before the broken pipe can be seen; either is quiet.
    expected = {0, console.EXIT_CLOSED_PIPE} if "--help" in argv else {console.EXIT_CLOSED_PIPE}
    assert proc.returncode in expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ('{"kind":"DAILY"}', "schedule.cadence.missing_field: DAILY requires these fields: "
         "local_time, timezone"),
        ('{"kind":"DAILY","local_time":"25:00","timezone":"UTC"}',
         "schedule.cadence.invalid_local_time: local_time must be HH:MM or HH:MM:SS "
         "(got local_time='25:00')"),
        ('{"kind":"daily"}', "(got kind='daily')"),
        ("nope", "schedule.cli.invalid_json: CADENCE_JSON is not JSON"),
    ],
)  # fmt: skip
def test_bad_cadence_is_one_coded_line_echoing_the_value(payload: str, expected: str) -> None:
    proc = _run("scheduling", "preview", payload)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert expected in lines[0]


def test_a_missing_trace_file_is_one_coded_line(tmp_path: Path) -> None:
    absent = tmp_path / "absent.json"
    proc = _run("scheduling-sim", "replay", str(absent))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"scheduling-sim: error: sim.trace_unreadable: cannot read trace '{absent}': "
        "No such file or directory"
    ]


@pytest.mark.parametrize("content", ["{", '{"format": "other"}', "[]", "\xff\xfe"])
def test_a_bad_trace_file_is_one_coded_line(tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content.encode("latin-1"))
    for command in ("replay", "shrink"):
        proc = _run("scheduling-sim", command, str(bad))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "sim.trace_invalid" in lines[0]
        assert str(bad) in lines[0]


def test_unknown_scenario_and_gate_are_coded_exit_2() -> None:
    proc = _run("scheduling-gates", "run", "--gate", "gate.nope", "--output", "/nonexistent/x")
    assert proc.returncode == 2
    assert "gate.nope" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_json_output_for_scripts() -> None:
    gates = json.loads(_run("scheduling-gates", "list", "--json").stdout)
    assert {"id", "milestone", "kind", "title", "facets"} <= set(gates[0])
    scenarios = json.loads(_run("scheduling-sim", "list", "--json").stdout)
    assert {"name", "summary"} == set(scenarios[0])


def _actions(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    out: list[tuple[str, argparse.Action]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _actions(sub, f"{path} {name}")
        else:
            out.append((path, action))
    return out


@pytest.mark.parametrize(
    "parser", [product_parser(configure_all=True), gates_parser(), sim_parser()], ids=SCRIPTS
)
def test_every_flag_has_help_without_markup(parser: argparse.ArgumentParser) -> None:
    for path, action in _actions(parser, parser.prog):
        if action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"{path} {action.option_strings or action.dest} has no help"
        assert "``" not in action.help, f"{path} {action.dest}: reStructuredText in help"
    assert "``" not in parser.format_help()


def test_progress_reaches_a_terminal_but_never_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    piped, tty = io.StringIO(), Tty()
    monkeypatch.setattr(sys, "stderr", piped)
    console.progress("exploring")
    monkeypatch.setattr(sys, "stderr", tty)
    console.progress("exploring")
    assert piped.getvalue() == ""
    assert tty.getvalue() == "exploring\n"


UNREACHABLE = "postgresql://app:hunter2@127.0.0.1:1/sched"
"""A server that refuses at once (nothing listens on port 1)."""


def _scheduling(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "scheduling"), *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
    )


def test_migrate_against_a_refusing_server_is_one_coded_line() -> None:
    proc = _scheduling("migrate", "--url", UNREACHABLE, env={})
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "schedule.database.unavailable" in proc.stderr
    assert "hunter2" not in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("migrate",),
        ("purge", "--tenant", "t"),
        ("repair-next-fire", "00000000-0000-0000-0000-000000000001"),
        ("tokens", "add", "--tenant", "t", "--principal", "p"),
    ],
    ids=lambda argv: argv[0],
)
@pytest.mark.parametrize(
    "url", ["not a url", "postgresql://app:hunter2@db:99999/sched"], ids=["garbage", "port"]
)
def test_a_database_url_that_does_not_parse_is_one_coded_line(
    argv: tuple[str, ...], url: str, tmp_path: Path
) -> None:
    env = {
        "AGENT_SCHEDULE_DATABASE_URL": url,
        "AGENT_SCHEDULE_API_TOKENS_FILE": str(tmp_path / "tokens.json"),
    }
    if argv[0] == "tokens":
        argv = (*argv, "--url", url)
    proc = _scheduling(*argv, env=env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "schedule.config.unparseable" in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout
