"""Real faults for the soak: SIGKILL of worker processes (restarted at once) and
terminated backends, at seeded random wall-clock intervals; optionally crashes of the
PostgreSQL server itself (at a fixed period) and one failover to a standby.

Each fault is recorded with whether it *landed*: a backend terminated while its
transaction was open (``xact_start`` set), or a process killed while one of its
connections had a transaction open (its sockets are matched to
``pg_stat_activity.client_port`` through ``/proc``), or a server crash or failover
while any client backend of the soak database had a transaction open. A soak whose
faults never landed inside a transaction proved nothing about atomicity: the report
says ``not_covered``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

Spawn = Callable[[str], Awaitable[asyncio.subprocess.Process]]
# Server-side faults: each kind asked for must itself land in an open transaction.
# ``switchover``, ``manager_failover`` and ``node_crash`` go through pg_auto_failover.
SERVER_KINDS = ("server_crash", "failover", "switchover", "manager_failover", "node_crash")
RECONNECT_SECONDS = 60.0
# What a connection the server (or the formation) dropped under us raises.
BROKEN_CONNECTION = (
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
AIM_SECONDS = 5.0
# A termination aimed at an open transaction waits at most this long for one.
TERMINATE_AIM_SECONDS = 1.0
AIM_POLL_SECONDS = 0.005


@dataclass
class Fault:
    kind: str
    at_wall_seconds: float
    target: str
    in_transaction: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "at_wall_seconds": round(self.at_wall_seconds, 3),
            "target": self.target,
            "in_transaction": self.in_transaction,
        }


@dataclass
class FaultReport:
    faults: list[Fault] = field(default_factory=list)
    outputs: list[bytes] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)
    killed_exit_codes: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        landed = [f for f in self.faults if f.in_transaction]
        by_kind: dict[str, dict[str, int]] = {}
        for fault in self.faults:
            entry = by_kind.setdefault(fault.kind, {"injected": 0, "landed_in_transaction": 0})
            entry["injected"] += 1
            entry["landed_in_transaction"] += fault.in_transaction
        # A server crash or failover asked for must itself have hit an open
        # transaction: the other kinds landing says nothing about it.
        server_missed = [
            kind
            for kind in SERVER_KINDS
            if kind in by_kind and not by_kind[kind]["landed_in_transaction"]
        ]
        return {
            "faults_injected": len(self.faults),
            "faults_landed_in_transaction": len(landed),
            "faults_by_kind": by_kind,
            "fault_coverage": "covered" if landed and not server_missed else "not_covered",
            "server_faults_not_landed": server_missed,
            "faults_landed": [f.as_json() for f in landed],
        }


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
    return inodes


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of ``pid``'s sockets (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as handle:
            for line in handle.readlines()[1:]:
                parts = line.split()
                if len(parts) > 9 and parts[9] in inodes:
                    ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


async def _open_transactions(conn: asyncpg.Connection) -> list[Any]:
    return list(
        await conn.fetch(
            "SELECT pid, client_port, xact_start IS NOT NULL AS in_tx FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
    )


@dataclass(frozen=True)
class ScriptedFault:
    """One server-side fault of kind ``kind`` at ``at`` wall seconds into the soak."""

    at: float
    kind: str
    run: Callable[[], None]


@dataclass(frozen=True)
class ServerFaults:
    """The server-side faults of a soak: ``crash`` (crash and restart the server: a
    private durable cluster) every ``crash_every`` wall seconds, ``fail_over``
    (kill the primary, promote its synchronous standby) once at ``failover_at``, and
    ``scripted`` faults at fixed moments (a failover manager's switchover, failover
    and lost node)."""

    crash: Callable[[], None] | None = None
    crash_every: float = 0.0
    fail_over: Callable[[], None] | None = None
    failover_at: float | None = None
    scripted: tuple[ScriptedFault, ...] = ()


async def _reconnect(url: str, seconds: float = RECONNECT_SECONDS) -> asyncpg.Connection:
    """A new admin connection through ``url``, retried while the server (or the
    formation) is between primaries."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await asyncpg.connect(url, timeout=5)
        except (*BROKEN_CONNECTION, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _aim(
    admin: asyncpg.Connection, backends: list[Any], deadline: float, seconds: float = AIM_SECONDS
) -> list[Any]:
    """Wait (bounded by ``seconds`` and the soak's end) for a moment when some client
    backend is inside a transaction: a fault meant for one should hit one (on a loaded
    machine the processes may still be starting)."""
    until = min(deadline, time.monotonic() + seconds)
    while not any(b["in_tx"] for b in backends) and time.monotonic() < until:
        await asyncio.sleep(AIM_POLL_SECONDS)
        backends = await _open_transactions(admin)
    return backends


async def run_with_faults(
    *,
    url: str,
    names: list[str],
    spawn: Spawn,
    wall_seconds: float,
    kill_every: float,
    terminate_every: float,
    seed: int,
    server: ServerFaults | None = None,
    admin_url: str | None = None,
) -> FaultReport:
    """Run the worker processes ``names`` for ``wall_seconds``, injecting faults with
    exponential gaps of mean ``kill_every`` / ``terminate_every`` seconds (0: none);
    a killed process is restarted at once under a new name (its ids stay unique).
    ``server`` adds server crashes at a fixed period (their count is known in advance:
    each is a restart of the whole database) and one failover; the supervisor's own
    connection reconnects after either (through ``url``, which must reach the new
    primary after a failover). ``admin_url`` (default ``url``) is where the supervisor
    looks for open transactions and terminates backends: the server itself when the
    workers go through a pooler. ``scripted`` server faults run at their moments."""
    rng = random.Random(seed)
    report = FaultReport()
    server = server or ServerFaults()
    live = {name: await spawn(name) for name in names}
    current = {name: name for name in names}  # base name -> its live incarnation
    restarts = dict.fromkeys(names, 0)
    started = time.monotonic()
    deadline = started + wall_seconds

    def gap(mean: float) -> float:
        return rng.expovariate(1.0 / mean) if mean > 0 else float("inf")

    next_kill = started + gap(kill_every)
    next_term = started + gap(terminate_every)
    crash_period = server.crash_every if server.crash is not None else 0.0
    next_crash = started + crash_period if crash_period > 0 else float("inf")
    next_failover = (
        started + server.failover_at
        if server.fail_over is not None and server.failover_at is not None
        else float("inf")
    )
    scripted = sorted(server.scripted, key=lambda f: f.at)
    admin_url = admin_url or url
    admin = await asyncpg.connect(admin_url)
    try:
        while True:
            now = time.monotonic()
            next_scripted = started + scripted[0].at if scripted else float("inf")
            upcoming = min(next_kill, next_term, next_crash, next_failover, next_scripted)
            if upcoming >= deadline:
                break
            await asyncio.sleep(max(upcoming - now, 0.0))
            try:
                backends = await _open_transactions(admin)
            except BROKEN_CONNECTION:
                # The previous server fault left the old primary read-only or gone.
                admin.terminate()
                admin = await _reconnect(admin_url)
                backends = await _open_transactions(admin)
            if upcoming == next_scripted:
                fault = scripted.pop(0)
                backends = await _aim(admin, backends, deadline)
                in_tx = any(b["in_tx"] for b in backends)
                await asyncio.to_thread(fault.run)
                report.faults.append(Fault(fault.kind, now - started, "formation", in_tx))
                admin.terminate()
                admin = await _reconnect(admin_url)
            elif upcoming in (next_crash, next_failover):
                backends = await _aim(admin, backends, deadline)
                in_tx = any(b["in_tx"] for b in backends)
                if upcoming == next_crash:
                    assert server.crash is not None
                    next_crash += crash_period
                    await asyncio.to_thread(server.crash)
                    report.faults.append(Fault("server_crash", now - started, "postmaster", in_tx))
                else:
                    assert server.fail_over is not None
                    next_failover = float("inf")
                    await asyncio.to_thread(server.fail_over)
                    report.faults.append(Fault("failover", now - started, "primary", in_tx))
                admin.terminate()
                admin = await _reconnect(admin_url)
            elif next_kill <= next_term:
                next_kill = time.monotonic() + gap(kill_every)
                base = rng.choice(sorted(restarts))
                victim = current[base]
                proc = live.pop(victim)
                ports = local_ports(proc.pid)
                in_tx = any(b["in_tx"] and b["client_port"] in ports for b in backends)
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGKILL)
                await proc.communicate()
                report.killed_exit_codes.append(proc.returncode or 0)
                report.faults.append(Fault("sigkill", now - started, victim, in_tx))
                restarts[base] += 1
                name = f"{base}-r{restarts[base]}"
                current[base] = name
                live[name] = await spawn(name)
            else:
                next_term = time.monotonic() + gap(terminate_every)
                # Half the terminations are aimed at an open transaction (waiting briefly
                # for one): a terminate that lands mid-transaction is the interesting one,
                # and aiming makes landing one a matter of construction, not of load.
                aimed = rng.random() < 0.5
                if aimed:
                    backends = await _aim(admin, backends, deadline, TERMINATE_AIM_SECONDS)
                if not backends:
                    continue
                open_tx = [b for b in backends if b["in_tx"]]
                pool = open_tx if open_tx and aimed else backends
                chosen = rng.choice(pool)
                try:
                    await admin.execute("SELECT pg_terminate_backend($1)", chosen["pid"])
                except BROKEN_CONNECTION:
                    continue  # the server went away under us; the next round reconnects
                report.faults.append(
                    Fault("terminate_backend", now - started, str(chosen["pid"]), chosen["in_tx"])
                )
    finally:
        admin.terminate()
    for proc in live.values():
        out, _ = await proc.communicate()
        report.outputs.append(out or b"")
        report.exit_codes.append(proc.returncode or 0)
    return report
