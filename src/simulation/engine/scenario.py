"""Scenarios as plain Python: setup, a concurrent phase (workers, faults), a quiet phase
without faults, and a check.

A worker is ``async def worker(ctx: WorkerContext) -> None``. ``ctx`` carries what
product code needs: ``ctx.connect()`` (an asyncpg connection whose backend the
interleaver watches; for SQLAlchemy use ``create_async_engine(ctx.url,
async_creator=ctx.connect, poolclass=NullPool)``), ``ctx.clock`` (virtual), ``ctx.probe``
(parks at every ``step``), ``ctx.ids`` (seeded, per task) and ``ctx.history``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from simulation.engine.checkers.violation import Violation
from simulation.engine.clock import VirtualClock
from simulation.engine.faults import FaultSpec, Transition
from simulation.engine.history import History, ProcessHistory
from simulation.engine.ids import SeededIds
from simulation.engine.interleaver import Backend, Interleaver, SimTask, SimulationProbe

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Footprint:
    """What the code after a step may touch, for pruning in exhaustive mode.

    Two transitions of different tasks commute when neither writes what the other
    reads or writes. Footprints must over-approximate; a step without one conflicts
    with everything (always sound).
    """

    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()

    @classmethod
    def of(cls, reads: Sequence[str] = (), writes: Sequence[str] = ()) -> Footprint:
        return cls(frozenset(reads), frozenset(writes))

    def conflicts(self, other: Footprint) -> bool:
        return bool(self.writes & (other.reads | other.writes) or other.writes & self.reads)


class ScenarioWorld:
    """Everything one execution shares: database, virtual clock, ids, history."""

    def __init__(self, url: str, clock: VirtualClock, ids: SeededIds, history: History) -> None:
        self.url = url
        self.clock = clock
        self.ids = ids
        self.history = history
        self.vars: dict[str, Any] = {}
        """Scratch space from setup to workers and check (ids of created rows, ...)."""
        self._connections: list[Any] = []

    async def connect(self) -> Any:
        """A plain asyncpg connection for setup, quiet phase and check (not watched)."""
        conn = await asyncpg.connect(self.url, server_settings={"application_name": "sim"})
        self._connections.append(conn)
        return conn

    async def close(self) -> None:
        for conn in self._connections:
            if not conn.is_closed():
                await conn.close()
        self._connections.clear()


DEADLOCK_STEP_MS = 100
_STAGGER_DEADLOCKS = [True]  # cleared once if the role may not set deadlock_timeout
_PID_AND_DEADLOCK_TIMEOUT = "SELECT pg_backend_pid() FROM set_config('deadlock_timeout', $1, false)"


class WorkerContext:
    """What a simulated worker receives."""

    def __init__(
        self, world: ScenarioWorld, task: SimTask, interleaver: Interleaver, rank: int = 0
    ) -> None:
        self.name = task.name
        self.rank = rank
        """The task's position among the workers sorted by name."""
        self.world = world
        self.url = world.url
        self.clock = world.clock
        self.probe = SimulationProbe()
        self.ids = world.ids.fork(task.name)
        self.history: ProcessHistory = world.history.for_process(task.name)
        self.vars = world.vars
        self._task = task
        self._interleaver = interleaver

    async def connect(self) -> Any:
        """An asyncpg connection whose backend the interleaver watches and can fault.

        Where the role may set it, ``deadlock_timeout`` is ``100 ms * (rank + 1)``: the
        tasks of a deadlock start waiting within one decision, so the victim is always
        the first task by name in the cycle instead of whichever check ran first. It is
        set by ``set_config`` after connecting, not as a startup parameter, which
        pgbouncer refuses (ADR 2370). The same statement reads ``pg_backend_pid()``:
        behind a pooler the driver's pid is the pooler's cancel key, not a backend.
        """
        refused = self._interleaver.refusal()
        if refused is not None:  # a refuse_connections window: the driver's own 57P03
            raise refused
        conn = await asyncpg.connect(
            self.url, server_settings={"application_name": f"sim:{self.name}"}
        )
        try:
            pid = await self._backend_pid(conn)
        except BaseException:
            conn.terminate()  # not registered yet: nothing else would close it
            raise
        self._interleaver.register_backend(
            self._task,
            Backend(
                pid,
                conn.close,
                conn.terminate,
                is_closed=conn.is_closed,
                pooled=pid != conn.get_server_pid(),
            ),
        )
        return conn

    async def _backend_pid(self, conn: Any) -> int:
        if _STAGGER_DEADLOCKS[0]:
            timeout = f"{DEADLOCK_STEP_MS * (self.rank + 1)}ms"
            try:
                return int(await conn.fetchval(_PID_AND_DEADLOCK_TIMEOUT, timeout))
            except asyncpg.InsufficientPrivilegeError:
                _STAGGER_DEADLOCKS[0] = False
        return int(await conn.fetchval("SELECT pg_backend_pid()"))

    def sqlalchemy_engine(self, **kwargs: Any) -> Any:
        """An ``AsyncEngine`` whose every connection comes from ``connect()`` (watched).

        ``NullPool``: each checkout opens a new watched connection, none outlives its use.
        """
        return create_async_engine(
            "postgresql+asyncpg://", async_creator=self.connect, poolclass=NullPool, **kwargs
        )

    def register_backend(
        self, pid: int, close: Callable[[], Awaitable[None]], drop: Callable[[], None]
    ) -> None:
        """Watch a connection opened some other way (``drop`` closes it without rollback)."""
        self._interleaver.register_backend(self._task, Backend(pid, close, drop))


Worker = Callable[[WorkerContext], Awaitable[None]]
Setup = Callable[[ScenarioWorld], Awaitable[None]]


@dataclass(frozen=True)
class ExecutionView:
    """What a check sees of the concurrent phase (besides the database and history)."""

    outcomes: Mapping[str, str]
    faults_fired: Sequence[tuple[Transition, str]]
    status: str


Check = Callable[[ScenarioWorld, ExecutionView], Awaitable[list[Violation]]]
Quiet = Callable[[ScenarioWorld, ExecutionView], Awaitable[None]]
Recovered = Callable[[ScenarioWorld, Transition], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    """A named, self-contained simulation.

    ``setup`` must establish every row the workers depend on (the database may be
    reused between executions). ``workers`` run concurrently under the interleaver; then
    ``quiet`` runs alone without faults (recovery, liveness: every due instant decided)
    and ``check`` returns violations. ``steps`` declares the probe steps the workers
    should reach (coverage); ``fault_steps`` (default: ``steps``) are where random and
    crash-sweep faults may fire; ``faults`` are fixed faults for every execution.
    """

    name: str
    summary: str
    setup: Setup
    workers: Mapping[str, Worker]
    check: Check
    steps: tuple[str, ...] = ()
    footprints: Mapping[str, Footprint] = field(default_factory=dict)
    faults: tuple[FaultSpec, ...] = ()
    fault_steps: tuple[str, ...] | None = None
    quiet: Quiet | None = None
    start: datetime = DEFAULT_START
    max_steps: int = 200
    template: Callable[[Any], str] | None = None
    """Given the provider's server, the name of a template database to clone for every
    execution (e.g. the migrated schema); ``None`` reuses one empty database."""
    allow_worker_errors: bool = False
    """If False, a worker that raises (other than after an injected fault) is a violation."""
    recovered: Recovered | None = None
    """Called after a ``crash_server`` fault once the server is back, before any task
    moves (given the transition the crash interrupted): read what survived recovery."""

    @property
    def eligible_fault_steps(self) -> tuple[str, ...]:
        return self.steps if self.fault_steps is None else self.fault_steps

    def independent(self, a: Transition, b: Transition) -> bool:
        if a.task == b.task:
            return False
        fa, fb = self.footprints.get(a.step), self.footprints.get(b.step)
        if fa is None or fb is None:
            return False
        return not fa.conflicts(fb)
