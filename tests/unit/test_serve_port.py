"""``serve --port`` / ``AGENT_SCHEDULE_API_PORT``: a value that is not a port in
1..65535 is one stable ``schedule.config.unparseable`` problem line naming its source,
exit 1 like the other settings, no traceback; a bad variable no longer breaks the
building of every subcommand's parser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduling.cli.http import api_port
from scheduling.config import UNPARSEABLE, ConfigurationError, parse_port

SCHEDULING = str(Path(sys.executable).with_name("scheduling"))
BAD = [
    "abc",
    "0",
    "-1",
    "65536",
    "99999",
    "2.5",
    "+80",
    "8_080",
    "\uff18\uff10",
    "80\x00",
    "\x00",
    "9" * 5000,
    "1e3",
]


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (None, None, 8080),
        ("1", None, 1),
        (None, "65535", 65535),
        ("9000", "x", 9000),
        (None, "  ", 8080),
        (None, " 81 ", 81),
    ],
)
def test_the_flag_then_the_environment_then_8080(
    flag: str | None, env: str | None, expected: int
) -> None:
    assert api_port(flag, env) == expected


@pytest.mark.parametrize("value", BAD)
def test_a_bad_port_is_one_stable_problem_naming_its_source(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for flag, env, named in ((value, None, "--port="), (None, value, "AGENT_SCHEDULE_API_PORT=")):
        assert api_port(flag, env) is None
        err = capsys.readouterr().err
        assert err.startswith(f"PROBLEM: {UNPARSEABLE}: {named}"), err
        assert err.count("\n") == 1, err
        assert "\x00" not in err, err
        assert len(err) < 200, err


def test_parse_port_raises_the_configuration_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_port("70000", "X")
    assert caught.value.code == UNPARSEABLE


def _scheduling(*argv: str, port_env: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SCHEDULE_")}
    if port_env is not None:
        env["AGENT_SCHEDULE_API_PORT"] = port_env
    return subprocess.run(
        [SCHEDULING, *argv], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_serve_refuses_a_bad_port_with_exit_1_and_no_traceback() -> None:
    for done in (_scheduling("serve", "--port", "http"), _scheduling("serve", port_env="70000")):
        assert done.returncode == 1, done.stderr
        assert f"PROBLEM: {UNPARSEABLE}: " in done.stderr
        assert "Traceback" not in done.stderr
        assert "usage:" not in done.stderr


def test_a_bad_port_variable_does_not_break_other_commands() -> None:
    done = _scheduling("serve", "--help", port_env="abc")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
