"""A primary and a streaming-replication standby owned by one check (failover).

Both run from the local server binaries on 127.0.0.1, as the same unprivileged user
as every other cluster of the provider, with durability on (``DURABLE``). The
primary gets ``wal_level=replica`` and WAL senders; the standby is cloned from it by
``pg_basebackup -R`` (which writes ``standby.signal`` and ``primary_conninfo``) and
streams from it. ``synchronous=True`` names the standby in the primary's
``synchronous_standby_names`` with ``synchronous_commit=on``: a COMMIT returns (and
becomes visible) only once the standby has flushed its WAL. ``synchronous=False``
is the asynchronous shape the failover check must be able to fail on
(a check forces its replication delay by clearing the standby's ``primary_conninfo``).

``kill_primary()`` SIGKILLs the primary's postmaster and every backend it left;
``promote()`` runs ``pg_ctl promote -w`` on the standby. ``multi_host_url(db)`` is
the URL a worker uses to reach whichever server is read-write. Leaving the context
manager stops both and removes both directories.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import asyncpg

from simulation.provider._binaries import Binaries, find_local
from simulation.provider._cluster import (
    DURABLE,
    Cluster,
    ClusterError,
    _kill_processes_in,
    _release_shared_memory,
    _tail,
    base_directory,
    make_root,
    remove_root,
)
from simulation.provider._database_server import DatabaseServer, _run
from simulation.provider._info import ProviderUnavailable, ServerInfo, database_of

STANDBY_NAME = "standby"
BASEBACKUP_TIMEOUT = 120.0
PROMOTE_TIMEOUT = 60
STREAMING_TIMEOUT = 60.0


class ReplicatingCluster(Cluster):
    """A durable cluster whose WAL can stream to (or from) another."""

    def __init__(
        self,
        root: Path,
        binaries: Binaries,
        environ: Mapping[str, str],
        *,
        extra: Mapping[str, str],
    ) -> None:
        super().__init__(root, binaries, environ)
        self.durability = dict(DURABLE)
        self.extra = dict(extra)

    def _settings(self) -> dict[str, str]:
        settings = super()._settings()
        settings.update({"wal_level": "replica", "max_wal_senders": "5", "hot_standby": "on"})
        settings.update(self.extra)
        return settings

    def base_backup_from(self, primary: Cluster) -> None:
        """Clone ``primary`` into this (empty) data directory as a standby."""
        self._prepare()
        self._version()
        args = [
            str(self.binaries.bindir / "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(self.data),
            "-R",
            "-X",
            "stream",
            "--checkpoint=fast",
            "--no-sync",
        ]
        with self.log_path.open("ab") as log:
            proc = self._run(args, log, signal.SIGKILL)
            try:
                code = proc.wait(timeout=BASEBACKUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = -1
        if code != 0:
            raise ClusterError(f"pg_basebackup failed ({code}):\n{_tail(self.log_path)}")

    def pg_ctl(self, *args: str, timeout: float = PROMOTE_TIMEOUT) -> None:
        command = [str(self.binaries.bindir / "pg_ctl"), "-D", str(self.data), *args]
        with self.log_path.open("ab") as log:
            code = self._run(command, log, signal.SIGKILL).wait(timeout=timeout)
        if code != 0:
            raise ClusterError(f"pg_ctl {' '.join(args)} failed ({code}):\n{_tail(self.log_path)}")


class ReplicaPair:
    """A started primary, its standby, and a ``DatabaseServer`` for each."""

    def __init__(
        self, primary: ReplicatingCluster, standby: ReplicatingCluster, *, synchronous: bool
    ) -> None:
        self.primary_cluster = primary
        self.standby_cluster = standby
        self.synchronous = synchronous
        self.primary = DatabaseServer(ServerInfo.from_dict(primary.info("local")))
        self.standby = DatabaseServer(ServerInfo.from_dict(standby.info("local")))

    def multi_host_url(self, database_url: str) -> str:
        """libpq's multi-host URL for the database ``database_url`` names, listing both
        servers and asking for the read-write one (asyncpg tries the hosts in order)."""
        name = database_of(database_url)
        hosts = ",".join(
            f"127.0.0.1:{c.port}" for c in (self.primary_cluster, self.standby_cluster)
        )
        return f"postgresql://postgres@{hosts}/{name}?target_session_attrs=read-write"

    def replication_state(self) -> list[tuple[str, str]]:
        """(application_name, sync_state) of every WAL sender of the primary that is
        streaming (a standby still catching up is never ``sync`` yet)."""
        return _run(self._replication_state)

    async def _replication_state(self) -> list[tuple[str, str]]:
        conn = await asyncpg.connect(self.primary.url_for("postgres"))
        try:
            rows = await conn.fetch(
                "SELECT application_name, sync_state FROM pg_stat_replication"
                " WHERE state = 'streaming'"
            )
        finally:
            await conn.close()
        return [(str(r["application_name"]), str(r["sync_state"])) for r in rows]

    def wait_streaming(self, timeout: float = STREAMING_TIMEOUT) -> None:
        """Until the standby streams in the asked mode (``sync`` or ``async``)."""
        expected = [(STANDBY_NAME, "sync" if self.synchronous else "async")]
        deadline = time.monotonic() + timeout
        while (state := self.replication_state()) != expected:
            if time.monotonic() > deadline:
                raise ClusterError(f"the standby is not streaming as {expected}: {state}")
            time.sleep(0.02)

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster and every backend it left behind."""
        cluster = self.primary_cluster
        proc = cluster.proc
        if proc is None or proc.poll() is not None:
            raise RuntimeError("the primary is not running")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _kill_processes_in(cluster.data)
        _release_shared_memory(cluster.data)
        cluster.proc = None

    def promote(self) -> None:
        """Promote the standby and wait until it accepts read-write sessions."""
        self.standby_cluster.pg_ctl("promote", "-w", "-t", str(PROMOTE_TIMEOUT))


def _settings_for(synchronous: bool) -> dict[str, str]:
    if synchronous:
        return {"synchronous_standby_names": STANDBY_NAME, "synchronous_commit": "on"}
    return {"synchronous_standby_names": "", "synchronous_commit": "on"}


@contextmanager
def replica_pair(
    *, synchronous: bool = True, environ: Mapping[str, str] | None = None
) -> Iterator[ReplicaPair]:
    """A durable primary streaming to a standby (``synchronous``: a synchronous one).
    Raises ``ProviderUnavailable`` without local binaries."""
    env = os.environ if environ is None else environ
    binaries = find_local(env)
    if binaries is None or not (binaries.bindir / "pg_basebackup").exists():
        raise ProviderUnavailable("a replica pair needs local PostgreSQL server binaries")
    base = base_directory(env)
    with ExitStack() as stack:
        primary_root = make_root(base)
        stack.callback(remove_root, primary_root)
        primary = ReplicatingCluster(primary_root, binaries, env, extra=_settings_for(synchronous))
        stack.callback(primary.stop)
        primary.initdb()
        primary.start()
        standby_root = make_root(base)
        stack.callback(remove_root, standby_root)
        # cluster_name is the walreceiver's application_name: the name the primary's
        # synchronous_standby_names waits for.
        standby = ReplicatingCluster(
            standby_root, binaries, env, extra={"cluster_name": STANDBY_NAME}
        )
        stack.callback(standby.stop)
        standby.base_backup_from(primary)
        standby.start()
        pair = ReplicaPair(primary, standby, synchronous=synchronous)
        pair.wait_streaming()
        yield pair
