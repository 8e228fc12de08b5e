"""A pg_auto_failover formation owned by one soak or test: a monitor, a primary and a
synchronous secondary, all run by ``pg_autoctl`` (Debian package
``postgresql-15-auto-failover``) on 127.0.0.1.

The harness starts each ``pg_autoctl`` as the provider's unprivileged server account
(``postgres`` when we are root, else ourselves), with ``HOME`` and the XDG directories
inside one temporary directory, so its configuration and state files go where the
data directories go and leave with them. Every keeper gets ``PR_SET_PDEATHSIG`` and
its own process group; ``close()`` stops the keepers, kills whatever is left in the
data directories and removes the directory.

Faults go through the manager: ``switchover()`` and ``failover()`` are
``pg_autoctl perform switchover|failover`` (the monitor orchestrates both: the
primary is demoted, the secondary promoted once it has caught up); ``crash_primary()``
SIGKILLs the primary's keeper and every PostgreSQL process of that node (the machine
is lost) and waits for the monitor to notice and promote the secondary;
``restart(node)`` starts the lost node's keeper again, and it rejoins as a secondary
(``pg_rewind``). The monitor's health checks are tightened (``MONITOR_SETTINGS``) so a
lost primary is replaced in seconds instead of the defaults' ~50 s.

With two data nodes pg_auto_failover replicates synchronously
(``synchronous_standby_names = 'ANY 1 (...)'``) while both are healthy, and lets a
lone primary commit alone (``wait_primary``) while its secondary is away.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulation.provider._binaries import Binaries, find_local
from simulation.provider._cluster import (
    _child_setup,
    _free_port,
    _kill_processes_in,
    _release_shared_memory,
    _tail,
    base_directory,
    make_root,
    remove_root,
    server_account,
)
from simulation.provider._database_server import DatabaseServer
from simulation.provider._info import ProviderUnavailable, ServerInfo, database_of

PG_AUTOCTL = "pg_autoctl"
NODE_NAMES = ("node_a", "node_b")
CREATE_TIMEOUT = 180.0
STABLE_TIMEOUT = 120.0
COMMAND_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0
POLL_SECONDS = 0.2
# Health checks every second, a node unhealthy after 3 s, a lost primary demoted
# after 3 s: the monitor replaces a lost primary within seconds (defaults: 5 s, 20 s, 30 s).
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "3000",
}


class FormationError(RuntimeError):
    """The formation could not be created or did not reach the asked state (the
    message carries the keepers' logs)."""


def find_pg_autoctl(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``pg_autoctl`` executable, or ``None`` when the package is not installed."""
    env = os.environ if environ is None else environ
    return shutil.which(PG_AUTOCTL, path=env.get("PATH", os.defpath))


@dataclass
class Node:
    """One data node: its name, port, data directory and keeper process."""

    name: str
    port: int
    pgdata: Path
    log_path: Path
    keeper: subprocess.Popen[bytes] | None = None
    crashes: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class Formation:
    """A running formation: ``monitor`` and two data ``nodes``."""

    root: Path
    binaries: Binaries
    executable: str
    env: dict[str, str]
    monitor_port: int
    nodes: list[Node] = field(default_factory=list)
    monitor_keeper: subprocess.Popen[bytes] | None = None

    @property
    def monitor_pgdata(self) -> Path:
        return self.root / "monitor"

    @property
    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable"

    # ------------------------------------------------------------------ processes
    def _popen(self, args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
        with log_path.open("ab") as log:
            return subprocess.Popen(
                [self.executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.root,
                close_fds=True,
                start_new_session=True,
                preexec_fn=_child_setup(server_account(), os.getpid(), signal.SIGTERM),
            )

    def autoctl(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run one ``pg_autoctl`` command to completion; its output, or FormationError."""
        log_path = self.root / "commands.log"
        with log_path.open("ab") as log:
            log.write(f"$ pg_autoctl {' '.join(args)}\n".encode())
        out = self.root / "command.out"
        out.unlink(missing_ok=True)
        proc = self._popen(list(args), out)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = -1
        text = out.read_text(errors="replace") if out.exists() else ""
        with log_path.open("a", encoding="utf-8") as log:
            log.write(text)
        if code != 0:
            raise FormationError(f"pg_autoctl {' '.join(args)} failed ({code}):\n{text[-4000:]}")
        return text

    def _start_keeper(self, node: Node) -> None:
        node.keeper = self._popen(["run", "--pgdata", str(node.pgdata)], node.log_path)

    # ------------------------------------------------------------------ state
    def state(self) -> list[dict[str, Any]]:
        """The monitor's view of every node (``pg_autoctl show state --json``)."""
        text = self.autoctl("show", "state", "--pgdata", str(self.monitor_pgdata), "--json")
        rows = json.loads(text[text.index("[") :])
        return [dict(r) for r in rows]

    def _roles(self) -> dict[str, tuple[str, str]]:
        try:
            rows = self.state()
        except (FormationError, ValueError):
            return {}
        return {
            str(r["nodename"]): (str(r["current_group_state"]), str(r["assigned_group_state"]))
            for r in rows
        }

    def primary(self) -> Node:
        """The node the monitor reports as primary (or ``wait_primary``)."""
        roles = self._roles()
        for node in self.nodes:
            reported, goal = roles.get(node.name, ("", ""))
            if reported == goal and reported in ("primary", "wait_primary"):
                return node
        raise FormationError(f"no primary: {roles}")

    def wait_for(self, wanted: dict[str, tuple[str, ...]], timeout: float) -> None:
        """Until every named node's reported and goal state are one of ``wanted[name]``."""
        deadline = time.monotonic() + timeout
        roles: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline:
            roles = self._roles()
            if all(
                name in roles and roles[name][0] == roles[name][1] and roles[name][0] in states
                for name, states in wanted.items()
            ):
                return
            time.sleep(POLL_SECONDS)
        raise FormationError(f"the formation did not reach {wanted}: {roles}\n{self.logs_tail()}")

    def wait_stable(self, timeout: float = STABLE_TIMEOUT) -> Node:
        """Until one node is ``primary`` and the other ``secondary`` (replication
        synchronous again); the primary."""
        deadline = time.monotonic() + timeout
        while True:
            roles = self._roles()
            states = sorted(s for s, g in roles.values() if s == g)
            if len(roles) == len(self.nodes) and states == ["primary", "secondary"]:
                return self.primary()
            if time.monotonic() > deadline:
                raise FormationError(f"the formation is not stable: {roles}\n{self.logs_tail()}")
            time.sleep(POLL_SECONDS)

    def logs_tail(self) -> str:
        parts = [f"--- {n.name}\n{_tail(n.log_path, 1500)}" for n in self.nodes]
        parts.append(f"--- monitor\n{_tail(self.root / 'monitor.log', 1500)}")
        return "\n".join(parts)

    # ------------------------------------------------------------------ faults
    def switchover(self) -> None:
        """``pg_autoctl perform switchover``: a planned change of primary, orchestrated
        by the monitor; returns once the formation is stable on the other node."""
        before = self.wait_stable()
        self.autoctl("perform", "switchover", "--pgdata", str(self.monitor_pgdata), "--wait", "90")
        after = self.wait_stable()
        if after is before:
            raise FormationError("switchover left the primary where it was")

    def failover(self) -> None:
        """``pg_autoctl perform failover``: the operator's failover command."""
        before = self.wait_stable()
        self.autoctl("perform", "failover", "--pgdata", str(self.monitor_pgdata), "--wait", "90")
        after = self.wait_stable()
        if after is before:
            raise FormationError("failover left the primary where it was")

    def crash_primary(self) -> Node:
        """SIGKILL the primary node whole (keeper and PostgreSQL) and wait until the
        monitor has promoted the other node to a read-write primary; the lost node."""
        lost = self.primary()
        self.kill(lost)
        survivor = next(n for n in self.nodes if n is not lost)
        self.wait_for({survivor.name: ("wait_primary", "primary")}, STABLE_TIMEOUT)
        return lost

    def kill(self, node: Node) -> None:
        keeper = node.keeper
        if keeper is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(keeper.pid, signal.SIGKILL)
            keeper.wait(timeout=30)
            node.keeper = None
        _kill_processes_in(node.pgdata)
        _release_shared_memory(node.pgdata)
        node.crashes += 1

    def restart(self, node: Node) -> None:
        """Start ``node``'s keeper again; it rejoins the formation as a secondary."""
        if node.keeper is not None and node.keeper.poll() is None:
            return
        self._start_keeper(node)

    # ------------------------------------------------------------------ clients
    def multi_host_url(self, database_url: str) -> str:
        """libpq's multi-host URL for the database ``database_url`` names, listing both
        data nodes and asking for the read-write one."""
        name = database_of(database_url)
        hosts = ",".join(n.address for n in self.nodes)
        return f"postgresql://postgres@{hosts}/{name}?target_session_attrs=read-write"

    def primary_server(self) -> DatabaseServer:
        """A ``DatabaseServer`` over the current primary (to make and clone databases:
        they replicate to the secondary)."""
        node = self.primary()
        version = self.binaries.bindir.parent.name
        info = {
            "source": "local",
            "version": version,
            "version_num": int(version) * 10_000 if version.isdigit() else 0,
            "dsn": f"postgresql://postgres@{node.address}/postgres",
            "durability": {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"},
            "binaries": str(self.binaries.bindir),
            "cluster_dir": str(self.root),
        }
        return DatabaseServer(ServerInfo.from_dict(info))

    def postgres_logs(self) -> dict[str, str]:
        """Each data node's PostgreSQL log text (``log/`` of the data directory)."""
        logs: dict[str, str] = {}
        for node in self.nodes:
            texts = [
                p.read_text(errors="replace")
                for p in sorted((node.pgdata / "log").glob("*"))
                if p.is_file()
            ]
            logs[node.name] = "".join(texts) or _tail(node.log_path, 1 << 24)
        return logs

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        keepers = [n.keeper for n in self.nodes] + [self.monitor_keeper]
        for keeper in keepers:
            if keeper is not None and keeper.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(keeper.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for keeper in keepers:
            if keeper is None:
                continue
            try:
                keeper.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(keeper.pid, signal.SIGKILL)
                keeper.wait()
        for pgdata in [n.pgdata for n in self.nodes] + [self.monitor_pgdata]:
            _kill_processes_in(pgdata)
            _release_shared_memory(pgdata)


def _environment(home: Path, binaries: Binaries, environ: Mapping[str, str]) -> dict[str, str]:
    env = binaries.env(environ)
    env["PATH"] = os.pathsep.join([str(binaries.bindir), env.get("PATH", os.defpath)])
    env["PG_CONFIG"] = str(binaries.bindir / "pg_config")
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["XDG_DATA_HOME"] = str(home / "share")
    env["XDG_RUNTIME_DIR"] = str(home / "run")
    return env


def _own(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    account = server_account()
    if account is not None:
        os.chown(path, account.uid, account.gid)


def _wait_monitor(formation: Formation, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if formation.monitor_keeper is not None and formation.monitor_keeper.poll() is not None:
            break
        with contextlib.suppress(FormationError):
            formation.autoctl("show", "uri", "--pgdata", str(formation.monitor_pgdata), timeout=10)
            return
        time.sleep(0.5)
    raise FormationError(f"the monitor did not start:\n{_tail(formation.root / 'monitor.log')}")


def _tune_monitor(formation: Formation) -> None:
    conf = formation.monitor_pgdata / "postgresql.auto.conf"
    lines = [f"{k} = '{v}'" for k, v in MONITOR_SETTINGS.items()]
    with conf.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


@contextmanager
def autofailover_formation(environ: Mapping[str, str] | None = None) -> Iterator[Formation]:
    """A started formation (monitor, primary, synchronous secondary); stopped and
    removed on exit. Raises ``ProviderUnavailable`` without ``pg_autoctl`` or local
    server binaries."""
    env = os.environ if environ is None else environ
    executable = find_pg_autoctl(env)
    if executable is None:
        raise ProviderUnavailable(
            "pg_autoctl not found: install the Debian package postgresql-15-auto-failover"
        )
    binaries = find_local(env)
    if binaries is None or not (binaries.bindir / "pg_ctl").exists():
        raise ProviderUnavailable("a formation needs local PostgreSQL server binaries (pg_ctl)")
    root = make_root(base_directory(env))
    home = root / "home"
    try:
        _own(home)
        for sub in ("config", "share", "run"):
            _own(home / sub)
        formation = Formation(
            root=home,
            binaries=binaries,
            executable=executable,
            env=_environment(home, binaries, env),
            monitor_port=_free_port(),
        )
        try:
            formation.monitor_keeper = formation._popen(
                [
                    "create",
                    "monitor",
                    "--pgdata",
                    str(formation.monitor_pgdata),
                    "--pgport",
                    str(formation.monitor_port),
                    "--hostname",
                    "127.0.0.1",
                    "--auth",
                    "trust",
                    "--no-ssl",
                ],
                home / "monitor.log",
            )
            if formation.monitor_keeper.wait(timeout=CREATE_TIMEOUT) != 0:
                raise FormationError(f"create monitor failed:\n{_tail(home / 'monitor.log')}")
            # pg_autoctl starts PostgreSQL with "-h *" unless told otherwise.
            formation.autoctl(
                "config",
                "set",
                "--pgdata",
                str(formation.monitor_pgdata),
                "postgresql.listen_addresses",
                "127.0.0.1",
            )
            _tune_monitor(formation)
            formation.monitor_keeper = formation._popen(
                ["run", "--pgdata", str(formation.monitor_pgdata)], home / "monitor.log"
            )
            _wait_monitor(formation, CREATE_TIMEOUT)
            for name in NODE_NAMES:
                node = Node(name, _free_port(), home / name, home / f"{name}.log")
                formation.nodes.append(node)
                node.keeper = formation._popen(
                    [
                        "create",
                        "postgres",
                        "--pgdata",
                        str(node.pgdata),
                        "--pgport",
                        str(node.port),
                        "--listen",
                        "127.0.0.1",
                        "--hostname",
                        "127.0.0.1",
                        "--name",
                        name,
                        "--auth",
                        "trust",
                        "--no-ssl",
                        "--monitor",
                        formation.monitor_uri,
                        "--run",
                    ],
                    node.log_path,
                )
                # One node at a time: the first becomes primary, the second its secondary.
                first = formation.nodes[0].name
                wanted: dict[str, tuple[str, ...]] = (
                    {name: ("single",)}
                    if name == first
                    else {first: ("primary",), name: ("secondary",)}
                )
                formation.wait_for(wanted, CREATE_TIMEOUT)
            formation.wait_stable()
            yield formation
        finally:
            formation.close()
    finally:
        remove_root(root)
