"""The harness side of the watchdog: spawn it, ask it for the server, let it go."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import simulation

BROKER_ENV = "SCHEDULING_DATABASE_BROKER"
SPAWN_TIMEOUT = 30.0
START_TIMEOUT = 300.0
CLOSE_TIMEOUT = 20.0


class BrokerError(RuntimeError):
    """The watchdog could not be started or did not answer."""


def request(socket_path: str, command: str, timeout: float = START_TIMEOUT) -> dict[str, Any]:
    """Send one command to the watchdog at ``socket_path`` and return its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(socket_path)
            conn.sendall(command.encode() + b"\n")
            with conn.makefile("rb") as reader:
                line = reader.readline()
        except OSError as exc:
            raise BrokerError(
                f"the database watchdog at {socket_path} did not answer: {exc}"
            ) from exc
    if not line:
        raise BrokerError(f"the database watchdog at {socket_path} closed without answering")
    answer: dict[str, Any] = json.loads(line)
    return answer


class Broker:
    """A watchdog process this harness owns; closing its stdin tears everything down."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        env = dict(environ)
        for key in (BROKER_ENV, "SCHEDULING_DATABASE_URL", "SCHEDULING_DATABASE_INFO"):
            env.pop(key, None)
        # The child must import this very package, even from a source checkout.
        package_parent = str(Path(next(iter(simulation.__path__))).parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_parent, env.get("PYTHONPATH", "")) if p
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "simulation.provider._watchdog"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
            # Its own session: a terminal Ctrl-C reaches the harness, which then closes
            # stdin in an orderly way; the watchdog never dies half-way through cleanup.
            start_new_session=True,
        )
        try:
            standby = self._read_standby()
        except BaseException:
            self.close()
            raise
        self.directory: str = standby["dir"]
        self.socket_path: str = standby["socket"]

    def _read_standby(self) -> dict[str, Any]:
        stdout = self.process.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], SPAWN_TIMEOUT)
        line = stdout.readline() if ready else b""
        stdout.close()
        if not line:
            code = self.process.poll()
            raise BrokerError(f"the database watchdog did not start (exit code {code})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def request(self, command: str) -> dict[str, Any]:
        return request(self.socket_path, command)

    def close(self) -> None:
        """Stop the server and remove its directory; waits for the watchdog to finish."""
        proc = self.process
        if proc.stdin is not None and not proc.stdin.closed:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()
        directory = getattr(self, "directory", None)
        if directory:
            shutil.rmtree(directory, ignore_errors=True)
