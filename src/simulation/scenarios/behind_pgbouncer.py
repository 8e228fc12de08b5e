"""Run gate checks (or any pytest selection) with every shared-server database reached
through pgbouncer in session mode (issue 25 item 5; docs/operations/pgbouncer.md).

``python -m simulation.scenarios.behind_pgbouncer [--pool-mode session] [PYTEST ARGS]``
starts a private cluster, a pgbouncer in front of it, and runs pytest with
``SCHEDULING_DATABASE_URL`` pointing at the pooler: the provider creates, clones and
drops every test database through pgbouncer, and each test's workers, services and
checks connect through it. Checks that start their own private clusters (durable,
failover) still reach those directly. The exit status is pytest's.

Default selection: the materialization gates that run on the shared server
(``test_materialize_uniqueness``, ``_race``, ``_paths``). It is kept unless an argument
names a test path, so ``-q -x`` or ``-k race`` narrow it instead of running the whole
suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from simulation.provider import URL_ENV
from simulation.provider._pgbouncer import POOL_MODES, pgbouncer_in_front
from simulation.provider._private import private_cluster

DEFAULT_SELECTION = (
    "src/gates/checks/test_materialize_uniqueness.py",
    "src/gates/checks/test_materialize_race.py",
    "src/gates/checks/test_materialize_paths.py",
)


def pytest_command(pytest_args: Sequence[str]) -> list[str]:
    """The pytest arguments: ``pytest_args``, plus the default selection unless one of
    them names a test path (``file.py`` or ``file.py::test``) that exists."""
    names_a_path = any(Path(arg.split("::", 1)[0]).exists() for arg in pytest_args)
    return [*pytest_args, *(() if names_a_path else DEFAULT_SELECTION)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulation.scenarios.behind_pgbouncer", description=__doc__
    )
    parser.add_argument("--pool-mode", choices=POOL_MODES, default="session")
    args, pytest_args = parser.parse_known_args(argv)
    with (
        private_cluster() as private,
        pgbouncer_in_front("127.0.0.1", private.cluster.port, pool_mode=args.pool_mode) as pooled,
    ):
        env = dict(os.environ)
        env[URL_ENV] = pooled.url_for(private.server.url_for("postgres"))
        env.pop("SCHEDULING_DATABASE_INFO", None)
        command = [sys.executable, "-m", "pytest", "-p", "no:randomly"]
        command += pytest_command(pytest_args)
        print(f"through pgbouncer ({args.pool_mode}): {env[URL_ENV]}", flush=True)
        code = subprocess.call(command, env=env)
        print(f"pgbouncer log: {pooled.log_text().count(' WARNING ')} WARNING lines", flush=True)
        return code


if __name__ == "__main__":
    raise SystemExit(main())
