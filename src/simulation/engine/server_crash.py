"""The server a simulation may crash: the ``crash_server`` fault's target.

The engine knows only this protocol; ``simulation.provider._private.PrivateCluster``
(a cluster of the check's own, never the shared server) satisfies it. The crash and
the restart run synchronously on the event loop on purpose: no task can observe a
half-restarted server (a connection refused while the postmaster starts up), so the
workers' next statements always meet dead connections and then a server in service,
and an execution stays a function of its seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

CRASH_MODES = ("kill", "immediate")


class CrashableServer(Protocol):
    """Kills the postmaster without a shutdown checkpoint, and starts it again on the
    same port (crash recovery replays the WAL), so every URL stays valid."""

    def crash(self, how: str = "kill") -> None: ...

    def restart(self) -> None: ...


@dataclass(frozen=True)
class ServerCrash:
    """How the simulator crashes ``server``: ``kill`` (SIGKILL of the postmaster) or
    ``immediate`` (SIGQUIT: PostgreSQL's immediate shutdown)."""

    server: CrashableServer
    how: str = "kill"

    def __post_init__(self) -> None:
        if self.how not in CRASH_MODES:
            raise ValueError(f"unknown crash mode {self.how!r}; expected one of {CRASH_MODES}")

    def crash_and_restart(self) -> None:
        self.server.crash(self.how)
        self.server.restart()
