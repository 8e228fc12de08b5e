"""The database server's CPU spent on one engine's connections (bench helper, ADR 2670).

A drain's client CPU says what the worker process costs; it does not say what the
server spends on the same decisions, and on a 2-core machine both share the cores.
``BackendPids`` records the server process id of every connection an engine opens
(SQLAlchemy's pool ``connect`` event, once per new connection, so nothing runs per
decision) through asyncpg's public ``get_server_pid``. ``cpu_seconds`` then reads
each backend's user + system time from ``/proc/<pid>/stat``: a backend is forked for
its connection, so its counters start at zero and cover that connection's whole
life (its startup included, a few milliseconds per connection). When a pid cannot be
read (the server runs on another host or in a container, or the backend exited) the
figure is ``None``, never a guess.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (``None`` if unreadable)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            text = stat.read()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces and parentheses): state is
    # field 3, utime 14 and stime 15 (proc(5)), i.e. indices 11 and 12 after ")".
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


class BackendPids:
    """The server pids of the connections ``engine`` opened since ``attach``."""

    def __init__(self) -> None:
        self.pids: list[int] = []

    def attach(self, engine: AsyncEngine) -> None:
        event.listen(engine.sync_engine, "connect", self.on_connect)

    def on_connect(self, dbapi_connection: Any, _record: Any) -> None:
        """The pool's ``connect`` listener."""
        self.pids.append(int(dbapi_connection.driver_connection.get_server_pid()))

    def cpu_seconds(self) -> float | None:
        """Their summed CPU now; ``None`` if any of them cannot be read."""
        total = 0.0
        for pid in self.pids:
            seconds = process_cpu_seconds(pid)
            if seconds is None:
                return None
            total += seconds
        return total
