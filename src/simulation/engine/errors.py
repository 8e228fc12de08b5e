"""Errors of the simulator itself, and the exceptions it injects into workers."""

from __future__ import annotations

from enum import StrEnum


class SimulationError(Exception):
    """The simulator could not do what it was asked (a harness problem, not a finding)."""


class SimulationStuck(SimulationError):
    """No task could move within the wall-clock limit (a hang, not a schedule choice)."""


class Divergence(SimulationError):
    """A replay reached a decision point that differs from the recorded one."""


class FaultKind(StrEnum):
    """The faults the simulator can inject when it releases a task from a step."""

    RAISE = "raise"
    """Raise inside the worker at the step: a client abort; the worker's own code unwinds."""
    DROP_CONNECTION = "drop_connection"
    """Close the task's sockets without ROLLBACK or Terminate, then raise in the worker."""
    TERMINATE_BACKEND = "terminate_backend"
    """pg_terminate_backend from an admin connection; the worker continues and meets it."""
    LOSE_COMMIT_ACK = "lose_commit_ack"
    """Drop the connection and raise an indeterminate error: at a step after COMMIT the
    write committed, before it the write rolled back; the worker cannot tell which."""
    CRASH_SERVER = "crash_server"
    """Crash the PostgreSQL server itself (SIGKILL or immediate shutdown of the
    postmaster) and restart it: every connection of every task dies, and what was not
    committed (and flushed) is gone; the workers continue and meet it. Needs a server
    the simulator may crash (``Simulator(server=...)``): never the shared one."""
    REFUSE_CONNECTIONS = "refuse_connections"
    """The server refuses connections for a while, as one starting up after a restart:
    every task's connections are dropped (the server rolls back what they had open),
    and for ``REFUSAL_SECONDS`` of virtual time every new watched connection raises
    asyncpg's own ``CannotConnectNowError`` (57P03, "the database system is starting
    up") at the driver boundary. The workers continue and meet it; their retries sleep
    on the virtual clock, so the window ends while they wait it out (ADR 2220). Any
    server will do, the shared one included: nothing is crashed."""


class InjectedFault(Exception):
    """Base of every exception the simulator raises inside a worker."""

    kind: FaultKind = FaultKind.RAISE

    def __init__(self, step: str) -> None:
        super().__init__(f"injected {self.kind.value} at {step}")
        self.step = step


class InjectedAbort(InjectedFault):
    """The client gave up at this step (process crash, cancellation, bug)."""

    kind = FaultKind.RAISE


class InjectedConnectionLoss(InjectedFault):
    """The connection vanished at this step; the server rolls the transaction back."""

    kind = FaultKind.DROP_CONNECTION


class InjectedAckLoss(InjectedFault):
    """The outcome of the last COMMIT is unknown to the client (indeterminate)."""

    kind = FaultKind.LOSE_COMMIT_ACK


def injected_fault_of(exc: BaseException) -> InjectedFault | None:
    """The injected fault behind ``exc``, if any: a driver may replace the injected
    exception while unwinding (a ROLLBACK on a dropped connection raises its own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, InjectedFault):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
