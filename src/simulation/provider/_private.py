"""A private PostgreSQL cluster owned by one check: its own log, its own durability,
and a postmaster the check may crash and restart.

The shared server (``acquire_server``) serves every test at once, so no test may
crash it, change its settings or read its log as its own. A check that needs any of
those starts a private cluster: ``durable=True`` is the durable lane (fsync,
synchronous_commit and full_page_writes on, see ``DURABLE``); ``crash()`` kills the
postmaster the way a power cut would kill the server process (SIGKILL, or SIGQUIT for
PostgreSQL's immediate shutdown, which writes no shutdown checkpoint either), and
``restart()`` starts it again on the same port, so clients' URLs stay valid and crash
recovery replays the WAL. Every server child dies with this process (PDEATHSIG);
``close()`` (or the context manager) stops it and removes the directory.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from simulation.provider._binaries import find_local
from simulation.provider._cluster import (
    DURABLE,
    Cluster,
    _kill_processes_in,
    _release_shared_memory,
    base_directory,
    make_root,
    remove_root,
)
from simulation.provider._database_server import DatabaseServer
from simulation.provider._info import ProviderUnavailable, ServerInfo

CRASH_SIGNALS = {"kill": signal.SIGKILL, "immediate": signal.SIGQUIT}


class PrivateCluster:
    """One started private cluster and the ``DatabaseServer`` over it."""

    def __init__(self, cluster: Cluster, server: DatabaseServer) -> None:
        self.cluster = cluster
        self.server = server
        self.crashes = 0

    @property
    def log_path(self) -> Path:
        return self.cluster.log_path

    @property
    def durability(self) -> dict[str, str]:
        return dict(self.cluster.durability)

    @property
    def postmaster_pid(self) -> int | None:
        return None if self.cluster.proc is None else self.cluster.proc.pid

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def crash(self, how: str = "kill") -> None:
        """Kill the postmaster (``kill``: SIGKILL; ``immediate``: SIGQUIT) and every
        backend left behind, without any shutdown checkpoint."""
        proc = self.cluster.proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError("the private cluster is not running")
        os.kill(proc.pid, CRASH_SIGNALS[how])
        proc.wait(timeout=30)
        # Orphaned backends notice the postmaster's death; make sure they are gone
        # before a new postmaster starts on the same data directory.
        _kill_processes_in(self.cluster.data)
        _release_shared_memory(self.cluster.data)
        # Its "ready" line would make the restart's readiness wait succeed at once;
        # every process of the cluster is gone, so the lock file is stale.
        (self.cluster.data / "postmaster.pid").unlink(missing_ok=True)
        self.cluster.proc = None
        self.crashes += 1

    def restart(self) -> None:
        """Start the postmaster again on the same port (crash recovery runs first)."""
        self.cluster.start(port=self.cluster.port)

    def close(self) -> None:
        try:
            self.cluster.stop()
        finally:
            remove_root(self.cluster.root)


@contextmanager
def private_cluster(
    *, durable: bool = False, environ: Mapping[str, str] | None = None
) -> Iterator[PrivateCluster]:
    """A started private cluster from the local server binaries (``durable``: the
    durable lane). Raises ``ProviderUnavailable`` without local binaries."""
    env = os.environ if environ is None else environ
    binaries = find_local(env)
    if binaries is None:
        raise ProviderUnavailable("a private cluster needs local PostgreSQL server binaries")
    root = make_root(base_directory(env))
    cluster = Cluster(root, binaries, env)
    if durable:
        cluster.durability = dict(DURABLE)
    private: PrivateCluster | None = None
    try:
        cluster.initdb()
        cluster.start()
        private = PrivateCluster(
            cluster, DatabaseServer(ServerInfo.from_dict(cluster.info("local")))
        )
        yield private
    finally:
        if private is not None:
            private.close()
        else:
            cluster.stop()
            remove_root(root)
