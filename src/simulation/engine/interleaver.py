"""The seeded interleaver: simulated tasks park at named steps; an oracle picks who moves.

It is the simulator's task scheduler, named apart from the product's scheduler role
(ADR 2210).

Invariant that makes runs deterministic: the interleaver releases one parked task and
then waits for *quiescence* -- every live task parked, asleep on the virtual clock,
or blocked on a PostgreSQL lock (``pg_blocking_pids`` on its backends) -- before the
next decision. A task inside a SQL statement is not parked, so "running but blocked"
is asked of PostgreSQL; a task that is running and not blocked is waited for. When no
task is enabled but some sleep, the clock jumps to the earliest deadline (autojump).
Tasks only overlap when a release unblocks a lock waiter; a step right after each
COMMIT keeps that overlap free of races.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import asyncpg

from simulation.engine.clock import VirtualClock
from simulation.engine.errors import (
    FaultKind,
    InjectedAbort,
    InjectedAckLoss,
    InjectedConnectionLoss,
    InjectedFault,
    SimulationError,
    SimulationStuck,
    injected_fault_of,
)
from simulation.engine.faults import FaultPolicy, Transition
from simulation.engine.history import History, StepRecord
from simulation.engine.pg_observer import PgObserver
from simulation.engine.server_crash import ServerCrash

START_STEP = "sim.start"
WAKE_STEP = "sim.wake"

_CURRENT: ContextVar[SimTask | None] = ContextVar("simulation_task", default=None)


def _never_closed() -> bool:
    return False


@dataclass
class Backend:
    """A worker's server connection: its backend pid, and how to close or drop it.

    ``pooled``: reached through a pooler (session mode). Once its client connection is
    closed the pooler may keep the server connection and hand it, pid and all, to
    another client, so a closed pooled backend is no longer watched, blocked-checked
    or terminated, and its end is "released" rather than "gone" (ADR 2370).
    """

    pid: int
    close: Callable[[], Awaitable[None]]
    drop: Callable[[], None]
    is_closed: Callable[[], bool] = _never_closed
    pooled: bool = False

    @property
    def watched(self) -> bool:
        """Whether ``pid`` still stands for this connection's server session."""
        return not (self.pooled and self.is_closed())


@dataclass
class _Parked:
    transition: Transition
    not_before: datetime | None
    future: asyncio.Future[type[InjectedFault] | None]


@dataclass
class SimTask:
    name: str
    interleaver: Interleaver
    visits: dict[str, int] = field(default_factory=dict)
    parked: _Parked | None = None
    backends: list[Backend] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    outcome: str | None = None
    reaped: bool = False
    faulted: FaultKind | None = None

    @property
    def live(self) -> bool:
        return not self.reaped


@dataclass(frozen=True)
class DecisionPoint:
    index: int
    options: tuple[Transition, ...]
    now: datetime


@dataclass(frozen=True)
class Choice:
    task: str
    fault: FaultKind | None = None
    forced_fault: bool = False
    """True when the oracle dictates the fault (replay); else the fault policy decides."""


class Oracle(Protocol):
    """Chooses the next task at each decision point; ``None`` stops the execution."""

    def choose(self, point: DecisionPoint) -> Choice | None: ...


@dataclass(frozen=True)
class Decision:
    index: int
    options: tuple[Transition, ...]
    chosen: Transition
    fault: FaultKind | None
    blocked: tuple[str, ...] = ()
    """Tasks waiting on a PostgreSQL lock at this decision (seen via pg_blocking_pids)."""

    def as_json(self) -> dict[str, object]:
        return {
            "i": self.index,
            "blocked": list(self.blocked),
            "options": [o.as_json() for o in self.options],
            "chosen": self.chosen.task,
            "step": self.chosen.step,
            "fault": None if self.fault is None else self.fault.value,
        }


@dataclass(frozen=True)
class ClockMove:
    index: int
    to: datetime


@dataclass
class PhaseResult:
    status: str  # "complete" | "pruned" | "bounded"
    events: list[Decision | ClockMove]
    outcomes: dict[str, str]
    reached: dict[str, int]
    faults_fired: list[tuple[Transition, FaultKind]]


WorkerMain = Callable[[], Awaitable[None]]

_FAULT_EXCEPTIONS: dict[FaultKind, type[InjectedFault] | None] = {
    FaultKind.RAISE: InjectedAbort,
    FaultKind.DROP_CONNECTION: InjectedConnectionLoss,
    FaultKind.TERMINATE_BACKEND: None,
    FaultKind.LOSE_COMMIT_ACK: InjectedAckLoss,
    FaultKind.CRASH_SERVER: None,
    FaultKind.REFUSE_CONNECTIONS: None,
}
REFUSAL_SECONDS = 5.0
"""How long (virtual time) a ``refuse_connections`` fault refuses new connections."""
Recovered = Callable[[Transition], Awaitable[None]]


class Interleaver:
    """Drives one concurrent phase of an execution."""

    def __init__(
        self,
        *,
        clock: VirtualClock,
        observer: PgObserver,
        oracle: Oracle,
        faults: FaultPolicy,
        history: History,
        max_steps: int,
        poll_interval: float = 0.002,
        stuck_timeout: float = 30.0,
        server: ServerCrash | None = None,
        recovered: Recovered | None = None,
    ) -> None:
        self.clock = clock
        self._server = server
        self._recovered = recovered
        self._observer = observer
        self._oracle = oracle
        self._faults = faults
        self._history = history
        self._max_steps = max_steps
        self._poll = poll_interval
        self._stuck_timeout = stuck_timeout
        self._tasks: list[SimTask] = []
        self._changed = asyncio.Event()
        self._decisions = 0
        self._events: list[Decision | ClockMove] = []
        self._fired: list[tuple[Transition, FaultKind]] = []
        self._aborting = False
        self._refusing_until: datetime | None = None
        self.refused = 0
        """Connects refused by ``refuse_connections`` faults so far."""

    # -- the worker side -------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self._decisions

    def new_task(self, name: str) -> SimTask:
        task = SimTask(name, self)
        self._tasks.append(task)
        return task

    def register_backend(self, task: SimTask, backend: Backend) -> None:
        task.backends.append(backend)

    def drives_current_task(self) -> bool:
        current = _CURRENT.get()
        return current is not None and current.interleaver is self

    async def sleep_until(self, deadline: datetime) -> None:
        current = _CURRENT.get()
        assert current is not None
        assert current.interleaver is self
        await self.park(current, WAKE_STEP, deadline)

    async def park(self, task: SimTask, step: str, not_before: datetime | None = None) -> None:
        visit = task.visits.get(step, 0) + 1
        task.visits[step] = visit
        future: asyncio.Future[type[InjectedFault] | None] = (
            asyncio.get_running_loop().create_future()
        )
        task.parked = _Parked(Transition(task.name, step, visit), not_before, future)
        self._changed.set()
        try:
            raised = await future
        finally:
            task.parked = None
        if raised is not None:
            raise raised(step)

    async def _main(self, task: SimTask, main: WorkerMain) -> None:
        _CURRENT.set(task)
        try:
            await self.park(task, START_STEP)
            await main()
            task.outcome = "ok"
        except asyncio.CancelledError:
            task.outcome = "aborted"
        except Exception as exc:
            injected = injected_fault_of(exc)
            if self._aborting:
                task.outcome = "aborted"  # the unwinding met the dropped connection
            elif injected is not None:
                task.outcome = f"fault:{injected.kind.value}"
            elif task.faulted is not None:
                # The driver's error after a killed backend: its type is not part of
                # the simulation's result.
                task.outcome = f"fault:{task.faulted.value}"
            else:
                task.outcome = f"raised:{type(exc).__name__}"
        finally:
            await self._close_backends(task)
            self._changed.set()

    @staticmethod
    async def _close_backends(task: SimTask) -> None:
        for backend in task.backends:
            try:
                await asyncio.wait_for(backend.close(), 5)
            except Exception:
                backend.drop()

    # -- the interleaver side ----------------------------------------------------------

    async def run(self, workers: Sequence[tuple[SimTask, WorkerMain]]) -> PhaseResult:
        for task, main in workers:
            task.task = asyncio.create_task(self._main(task, main), name=f"sim:{task.name}")
        status = "error"  # an exception (stuck, divergence) also aborts every task
        try:
            status = await self._drive()
        finally:
            if status != "complete":
                await self._abort_all()
            await self._reap()
        reached: dict[str, int] = {}
        for task in self._tasks:
            for step, count in task.visits.items():
                reached[step] = reached.get(step, 0) + count
        return PhaseResult(
            status,
            list(self._events),
            {t.name: t.outcome or "unknown" for t in self._tasks},
            reached,
            list(self._fired),
        )

    async def _drive(self) -> str:
        all_blocked_since: float | None = None
        while True:
            await self._quiesce()
            live = [t for t in self._tasks if t.live]
            if not live:
                return "complete"
            now = self.clock.now()
            parked = [t for t in live if t.parked is not None]
            enabled = sorted(
                (t for t in parked if t.parked and (t.parked.not_before or now) <= now),
                key=lambda t: t.name,
            )
            if not enabled:
                sleepers = [t.parked.not_before for t in parked if t.parked and t.parked.not_before]
                if sleepers:
                    self.clock.advance_to(min(sleepers))
                    self._events.append(ClockMove(self._decisions, self.clock.now()))
                    continue
                # Every live task is blocked: PostgreSQL's deadlock detector will act,
                # unless the lock holder is outside the simulation (a hang: report it).
                all_blocked_since = all_blocked_since or time.monotonic()
                if time.monotonic() - all_blocked_since > self._stuck_timeout:
                    names = ", ".join(t.name for t in live)
                    raise SimulationStuck(f"every task blocked on a lock: {names}")
                await self._wait_change(self._poll)
                continue
            all_blocked_since = None
            if self._decisions >= self._max_steps:
                return "bounded"
            options = tuple(t.parked.transition for t in enabled if t.parked)
            choice = self._oracle.choose(DecisionPoint(self._decisions, options, now))
            if choice is None:
                return "pruned"
            chosen = next(t for t in enabled if t.name == choice.task)
            assert chosen.parked is not None
            transition = chosen.parked.transition
            fault = choice.fault if choice.forced_fault else self._faults.decide(transition)
            blocked = tuple(sorted(t.name for t in live if t.parked is None))
            self._events.append(Decision(self._decisions, options, transition, fault, blocked))
            self._history.steps.append(
                StepRecord(
                    self._decisions,
                    chosen.name,
                    transition.step,
                    transition.visit,
                    None if fault is None else fault.value,
                )
            )
            self._decisions += 1
            raised: type[InjectedFault] | None = None
            if fault is not None:
                raised = await self._inject(chosen, fault)
                self._fired.append((transition, fault))
            chosen.parked.future.set_result(raised)
            chosen.parked = None

    async def _inject(self, task: SimTask, fault: FaultKind) -> type[InjectedFault] | None:
        task.faulted = fault
        pids = [b.pid for b in task.backends if b.watched]
        if fault in (FaultKind.DROP_CONNECTION, FaultKind.LOSE_COMMIT_ACK):
            for backend in task.backends:
                backend.drop()
            await self._wait_ended(task.backends)
        elif fault is FaultKind.CRASH_SERVER:
            await self._crash_server(task)
        elif fault is FaultKind.REFUSE_CONNECTIONS:
            await self._refuse_connections(task)
        elif fault is FaultKind.TERMINATE_BACKEND:
            await self._observer.terminate(pids)
            # The driver notices the server's goodbye at a time of its own choosing, and
            # its error type depends on when; close the client side now so the worker's
            # next statement always meets a closed connection.
            for backend in task.backends:
                backend.drop()
        await asyncio.sleep(0)
        return _FAULT_EXCEPTIONS[fault]

    async def _refuse_connections(self, task: SimTask) -> None:
        """A restart's aftermath without the crash: every task's connections are
        dropped (the server rolls back what they had open) and new ones are refused
        for ``REFUSAL_SECONDS`` of virtual time."""
        dropped: list[Backend] = []
        for other in self._tasks:
            if other.backends:
                for backend in other.backends:
                    backend.drop()
                    dropped.append(backend)
                other.faulted = other.faulted or FaultKind.REFUSE_CONNECTIONS
        task.faulted = FaultKind.REFUSE_CONNECTIONS
        await self._wait_ended(dropped)
        self._refusing_until = self.clock.now() + timedelta(seconds=REFUSAL_SECONDS)

    def refusal(self) -> Exception | None:
        """What a new watched connection raises now: asyncpg's own 57P03 inside a
        ``refuse_connections`` window, else ``None`` (connect for real)."""
        until = self._refusing_until
        if until is None or self.clock.now() >= until:
            return None
        self.refused += 1
        error: Exception = asyncpg.exceptions.CannotConnectNowError(
            "the database system is starting up"
        )
        return error

    async def _crash_server(self, task: SimTask) -> None:
        """Crash and restart the server; every task's connections died with it."""
        if self._server is None:
            raise SimulationError(
                f"a {FaultKind.CRASH_SERVER.value} fault needs a server the simulator may"
                " crash (Simulator(server=ServerCrash(...))), never the shared one"
            )
        self._server.crash_and_restart()
        for other in self._tasks:
            if other.backends:
                # Close the client side now, as for a terminated backend: the next
                # statement of every task meets a closed connection, whenever its
                # driver would have noticed the server's death. The pids are of the
                # dead server; a new one may reuse them, so they are forgotten.
                for backend in other.backends:
                    backend.drop()
                other.backends.clear()
                other.faulted = other.faulted or FaultKind.CRASH_SERVER
        task.faulted = FaultKind.CRASH_SERVER
        await self._observer.reconnect()
        if self._recovered is not None and task.parked is not None:
            # Before any task moves: what survived crash recovery, read fresh.
            await self._recovered(task.parked.transition)

    async def _wait_change(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), seconds)

    async def _reap(self) -> None:
        for task in self._tasks:
            if not task.reaped and task.task is not None and task.task.done():
                await self._wait_ended(task.backends)
                task.reaped = True

    async def _wait_ended(self, backends: Sequence[Backend]) -> None:
        """Wait until these closed or dropped connections hold nothing on the server: a
        direct backend has exited; a pooled one has exited or been released to the
        pool (idle, no locks, or linked to an open watched connection again)."""
        await self._observer.wait_gone([b.pid for b in backends if not b.pooled])
        pooled = [b.pid for b in backends if b.pooled]
        if pooled:
            await self._observer.wait_released(pooled, self._linked_pids)

    def _linked_pids(self) -> set[int]:
        return {b.pid for t in self._tasks for b in t.backends if b.pooled and b.watched}

    async def _quiesce(self) -> None:
        """Return once no live task is running unblocked."""
        deadline = time.monotonic() + self._stuck_timeout
        while True:
            self._changed.clear()
            await self._reap()
            running = [t for t in self._tasks if t.live and t.parked is None]
            if not running:
                return
            await self._wait_change(self._poll)
            running = [t for t in self._tasks if t.live and t.parked is None]
            if not running or any(t.task is not None and t.task.done() for t in running):
                continue
            pids = [b.pid for t in running for b in t.backends if b.watched]
            blocked = await self._observer.blocked(pids)
            if all(any(b.watched and b.pid in blocked for b in t.backends) for t in running):
                return
            if time.monotonic() > deadline:
                names = ", ".join(t.name for t in running)
                raise SimulationStuck(f"tasks still running after {self._stuck_timeout}s: {names}")

    async def _abort_all(self) -> None:
        self._aborting = True
        for task in self._tasks:
            if task.task is not None and not task.task.done():
                for backend in task.backends:
                    backend.drop()
                task.task.cancel()
        await asyncio.gather(
            *(t.task for t in self._tasks if t.task is not None), return_exceptions=True
        )


class SimulationProbe:
    """The ``scheduling.ports.Probe`` of the simulator: parks the calling simulated task.

    Outside a simulated task (setup, check, production code paths) it returns at once.
    """

    async def step(self, name: str) -> None:
        task = _CURRENT.get()
        if task is not None:
            await task.interleaver.park(task, name)
