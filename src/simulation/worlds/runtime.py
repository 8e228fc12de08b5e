"""Wiring of the run substrate for gate checks and tests (not a test module).

``Autojump`` drives a ``VirtualClock`` for real concurrent tasks (workers on real
PostgreSQL): whenever every participant is asleep on the clock, it jumps to the
earliest wake-up. Nobody sleeps inside a transaction, so a task that is not asleep is
running SQL or waiting for a lock another running task will release; the jump therefore
never skips work, and every latency measured in virtual time is the queue's, not the
machine's.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from scheduling.bootstrap import build_run_worker
from scheduling.domain.revision import RunLimits
from scheduling.ports.probe import Probe
from scheduling.ports.records import RunRecord
from scheduling.ports.runtime import QueueCapacity, RunPriority, RunTerminalHook
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime import RunSubmitter, RunWorker, Submission, WorkerSettings
from scheduling.storage import Storage
from scheduling.testing import PostgresUnitOfWorkFactory, storage_over
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    LIMITS,
    POLICY,
    seed_agent_version,
    world_settings,
)

# An agent version that declares tools (the service_support agent declares none).
TOOL_AGENT_VERSION = "v-tools"
DECLARED_TOOLS = ("memory.recall", "web.search", "bulk.output")


class Autojump:
    """A ``ClockDriver``: jump the clock when every participant sleeps.

    A participant is one sequential task (``spawn``): it must not run sleeping
    sub-tasks concurrently (spawn each claim loop, not ``RunWorker.serve``)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._sleepers: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._active = 0
        self._changed = asyncio.Event()
        self.jumps = 0
        clock.attach(self)

    def drives_current_task(self) -> bool:
        return True

    async def sleep_until(self, deadline: datetime) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (deadline, next(self._order), future))
        self._changed.set()
        await future

    async def _participant(self, work: Awaitable[Any]) -> Any:
        try:
            return await work
        finally:
            self._active -= 1
            self._changed.set()

    def spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``work`` as a participant (counted until it returns or raises)."""
        self._active += 1
        return asyncio.ensure_future(self._participant(work))

    async def drive(self, tasks: Iterable[asyncio.Task[Any]]) -> None:
        """Jump until every spawned participant returned; re-raise the first error."""
        pending = list(tasks)
        while self._active > 0:
            while len(self._sleepers) < self._active:
                self._changed.clear()
                if self._active == 0:
                    break
                await self._changed.wait()
            if self._active == 0:
                break
            deadline = self._sleepers[0][0]
            if deadline > self.clock.now():
                self.clock.advance_to(deadline)
            self.jumps += 1
            while self._sleepers and self._sleepers[0][0] <= self.clock.now():
                _, _, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
            await asyncio.sleep(0)
        for task in pending:
            await task

    def detach(self) -> None:
        self.clock.attach(None)


async def seed_tool_agent(admin: UnitOfWorkFactory, at: datetime) -> None:
    """An agent version declaring ``DECLARED_TOOLS`` (same agent id and policy)."""
    spec = {"model": "scripted", "tools": list(DECLARED_TOOLS)}
    await seed_agent_version(admin, TOOL_AGENT_VERSION, POLICY, at=at, spec=spec)


def submission(
    script: str,
    *,
    priority: RunPriority = RunPriority.INTERACTIVE,
    limits: RunLimits = LIMITS,
    scopes: frozenset[str] = frozenset(),
    agent_version: str = AGENT_VERSION,
    timeout_seconds: float | None = None,
) -> Submission:
    return Submission(
        agent_id=AGENT_ID,
        agent_version=agent_version,
        policy_profile=POLICY,
        instruction=f"Do the work. [script:{script}]",
        requested_scopes=scopes,
        limits=limits,
        priority=priority,
        timeout_seconds=timeout_seconds,
    )


def limits(**overrides: Any) -> RunLimits:
    values: dict[str, Any] = {
        "max_steps": 20,
        "max_model_calls": 20,
        "max_tool_calls": 20,
        "max_cost": Decimal("2"),
    }
    values.update(overrides)
    return RunLimits(**values)


class Unaccounted:
    """A ``RunTerminalHook`` that does nothing: for a scenario whose footprints model only
    the run worker's own transactions (post-run accounting is the sweep's there)."""

    async def run_finished(self, run: RunRecord) -> None:
        return None


UNACCOUNTED = Unaccounted()


def run_worker(
    admin: Storage | PostgresUnitOfWorkFactory,
    clock: VirtualClock,
    owner: str,
    *,
    capacity: QueueCapacity,
    settings: WorkerSettings | None = None,
    probe: Probe | None = None,
    on_finished: RunTerminalHook | None = None,
    priority: RunPriority | None = None,
) -> RunWorker:
    """The run worker production builds (``bootstrap.build_run_worker``: the trusted
    path, the scripted agent and tools, post-run accounting unless ``on_finished``
    replaces it) claiming ``priority``'s class, or both by default. ``admin`` is a
    storage, or a trusted factory whose engine the worker's storage is opened over."""
    return build_run_worker(
        world_settings(),
        priority,
        clock=clock,
        ids=SeededIds(0).fork(f"run-worker-{owner}"),
        probe=probe,
        storage=admin if isinstance(admin, Storage) else storage_over(admin),
        capacity=capacity,
        owner=owner,
        worker_settings=settings,
        on_finished=on_finished,
    ).worker


def submitter(admin: UnitOfWorkFactory, clock: VirtualClock, seed: int = 0) -> RunSubmitter:
    return RunSubmitter(admin, clock, SeededIds(seed).fork("submitter"))


async def run_row(admin: UnitOfWorkFactory, run_id: UUID) -> Any:
    async with admin.begin() as uow:
        return await uow.runs.get(run_id, None)
