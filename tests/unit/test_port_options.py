"""The other port settings parse like ``serve --port`` (config.parse_port): ``mcp
--port`` / ``AGENT_SCHEDULE_MCP_PORT``, ``scheduler``/``run-worker --metrics-port``,
``dev --port`` and ``python -m simulation.devstack --port``. A value that is not a
port is one stable ``PROBLEM: schedule.config.unparseable: ...`` line naming its
source, exit 1, no traceback and no argparse usage error; a bad MCP port variable no
longer breaks the building of every subcommand's parser. 0 stays allowed where it
meant something (a free port; no metrics port)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduling.cli.dev import dev_port
from scheduling.cli.mcp import mcp_port
from scheduling.cli.serve import metrics_address
from scheduling.config import UNPARSEABLE, ConfigurationError, Settings

SCHEDULING = str(Path(sys.executable).with_name("scheduling"))
BAD = ["abc", "-1", "65536", "2.5", "+80", "8_080", "\uff18\uff10", "80\x00", "9" * 5000]


def _run(argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SCHEDULE_")}
    return subprocess.run(
        argv, env={**env, **extra}, capture_output=True, text=True, timeout=60, check=False
    )


def _refused(done: subprocess.CompletedProcess[str], named: str) -> None:
    assert done.returncode == 1, done.stderr
    assert f"PROBLEM: {UNPARSEABLE}: {named}=" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "usage:" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [(None, None, 8090), ("0", None, 0), ("9000", "x", 9000), (None, " ", 8090), (None, "91", 91)],
)
def test_mcp_port_is_the_flag_then_the_environment_then_8090(
    flag: str | None, env: str | None, expected: int
) -> None:
    assert mcp_port(flag, env) == expected


@pytest.mark.parametrize("value", BAD)
def test_every_bad_port_is_the_stable_unparseable_problem(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for flag, env, named in ((value, None, "--port"), (None, value, "AGENT_SCHEDULE_MCP_PORT")):
        with pytest.raises(ConfigurationError) as caught:
            mcp_port(flag, env)
        assert caught.value.code == UNPARSEABLE
        assert caught.value.details["problems"][0].startswith(f"{UNPARSEABLE}: {named}=")
    assert dev_port(value) is None
    err = capsys.readouterr().err
    assert err.startswith(f"PROBLEM: {UNPARSEABLE}: --port="), err
    assert err.count("\n") == 1, err
    assert "\x00" not in err, err
    assert len(err) < 200, err
    args = argparse.Namespace(metrics_port=value, metrics_host=None)
    with pytest.raises(ConfigurationError) as caught:
        metrics_address(args, Settings.from_env({}))
    assert "--metrics-port=" in caught.value.details["problems"][0]


def test_zero_and_unset_keep_their_meaning() -> None:
    settings = Settings.from_env({})
    assert dev_port("0") == 0
    assert dev_port("8080") == 8080
    assert (
        metrics_address(argparse.Namespace(metrics_port="0", metrics_host=None), settings) is None
    )
    assert (
        metrics_address(argparse.Namespace(metrics_port=None, metrics_host=None), settings) is None
    )
    assert metrics_address(
        argparse.Namespace(metrics_port="9100", metrics_host="0.0.0.0"),
        settings,
    ) == ("0.0.0.0", 9100)


def test_a_bad_mcp_port_variable_does_not_break_other_commands() -> None:
    for argv in (["serve", "--help"], ["mcp", "--help"], ["scheduler", "--help"]):
        done = _run([SCHEDULING, *argv], AGENT_SCHEDULE_MCP_PORT="abc")
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr


def test_each_command_refuses_a_bad_port_with_exit_1_and_no_traceback() -> None:
    _refused(_run([SCHEDULING, "mcp", "--port", "http"]), "--port")
    _refused(_run([SCHEDULING, "mcp"], AGENT_SCHEDULE_MCP_PORT="70000"), "AGENT_SCHEDULE_MCP_PORT")
    _refused(_run([SCHEDULING, "scheduler", "--metrics-port", "70000"]), "--metrics-port")
    _refused(
        _run([SCHEDULING, "run-worker", "--class", "async", "--metrics-port", "x"]),
        "--metrics-port",
    )
    _refused(_run([SCHEDULING, "dev", "--port", "http"]), "--port")
    _refused(_run([sys.executable, "-m", "simulation.devstack", "--port", "http"]), "--port")
