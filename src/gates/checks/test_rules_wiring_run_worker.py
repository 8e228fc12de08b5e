"""The run worker as the composition root builds it from ``Settings``, served as the
``run-worker`` command serves it (``role.worker.serve(role.slots, stop)``).

Every other check of the run worker injects its capacity, worker settings or claim
loops; these inject only the storage (the check's trusted factory) and read the rest
from ``AGENT_SCHEDULE_*`` settings, so a composition root that drops one is caught:

* ``gate.schedule.priority_fair`` - an interactive and an async worker each run the
  claim loops their class is configured with (``INTERACTIVE_SLOTS``, ``ASYNC_SLOTS``),
  no more and no fewer; and the fleet capacity comes from the configured reserves: an
  async worker with more loops than async work may use holds exactly ``TOTAL_SLOTS -
  INTERACTIVE_RESERVED_SLOTS`` runs, an interactive one exactly ``TOTAL_SLOTS -
  ASYNC_RESERVED_SLOTS``.
* ``rule.lease.fencing`` (the run is leased, checkpointed, fenced and recoverable by
  the same components) - a stop lets held runs go on for exactly
  ``AGENT_SCHEDULE_RUN_DRAIN_SECONDS`` on the Clock: a microsecond before, every run is
  still leased and ``serve`` has not returned; then each is checkpointed and its lease
  released (fenced) before ``serve`` returns, and another worker built from the same
  settings reclaims it at once, recovered, with the next fencing token, from that
  checkpoint.

Time is a virtual clock whose sleepers this check wakes by hand (``ManualTime``), so
nothing depends on the machine's speed: a claim loop that holds a run sleeps a
heartbeat piece, an idle one its poll, and neither moves until the check advances.

Tests of the test: ``scheduling-gates mutate`` (``wiring.run_worker_slots_swapped``,
``wiring.run_worker_slots_fleet_total``, ``wiring.serve_one_loop``,
``wiring.capacity_reserves_swapped``, ``wiring.run_worker_drain_ignored``,
``wiring.drain_waits_a_lease``, ``wiring.release_keeps_lease``,
``wiring.serve_returns_at_stop``, ``wiring.env_drain_ignored``,
``wiring.env_class_slots_swapped``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from scheduling.bootstrap import RunWorkerRole, build_run_worker
from scheduling.config import Settings
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import RunPriority
from scheduling.testing import PostgresUnitOfWorkFactory, storage_over
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.runtime import submission, submitter
from simulation.worlds.service import START, principal, seed_durable, world_settings

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.priority_fair"
FENCING = "rule.lease.fencing"
WHO = principal("wired-runner", scopes={"memory.read"})
DRAIN_SECONDS = 7.0
"""Far from the 30 s default and the 60 s lease, and shorter than a heartbeat piece."""
HELD_SCRIPT = "run_long:600"
"""One model call, then a 600 s charged wait: a claimed run is held until released."""
SETTLE_POLLS = 10
POLL_REAL_SECONDS = 0.05
REAL_TIMEOUT = 30.0


class ManualTime:
    """A ``ClockDriver`` that parks every sleeper until ``advance`` passes its deadline
    (the check moves time; nothing sleeps in real time)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []
        clock.attach(self)

    def drives_current_task(self) -> bool:
        return True

    async def sleep_until(self, deadline: datetime) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((deadline, future))
        try:
            await future
        finally:
            self._sleepers = [(d, f) for d, f in self._sleepers if f is not future]

    @property
    def sleeping(self) -> int:
        return sum(1 for _, f in self._sleepers if not f.done())

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.now()
        for deadline, future in list(self._sleepers):
            if deadline <= now and not future.done():
                future.set_result(None)

    def detach(self) -> None:
        self.clock.attach(None)


def settings(**env: str) -> Settings:
    return world_settings(
        AGENT_SCHEDULE_RUN_DRAIN_SECONDS=str(DRAIN_SECONDS),
        **{f"AGENT_SCHEDULE_{k}": v for k, v in env.items()},
    )


@dataclass
class Env:
    admin: PostgresUnitOfWorkFactory
    clock: VirtualClock
    time: ManualTime

    def worker(self, configured: Settings, priority: RunPriority, owner: str) -> RunWorkerRole:
        """The run worker production builds from ``configured`` (only the storage is the
        check's: its trusted engine)."""
        return build_run_worker(
            configured,
            priority,
            clock=self.clock,
            ids=SeededIds(7).fork(owner),
            storage=storage_over(self.admin),
            owner=owner,
        )

    async def queue(self, priority: RunPriority, n: int) -> list[Any]:
        submit = submitter(self.admin, self.clock, seed=int(priority) + n)
        return [
            await submit.submit(WHO, submission(HELD_SCRIPT, priority=priority)) for _ in range(n)
        ]

    async def held(self, owner: str) -> int:
        """Runs ``owner`` holds now: RUNNING under its unexpired lease."""
        async with self.admin.engine.connect() as conn:
            found = await conn.execute(
                text(
                    "SELECT count(*) FROM runs WHERE status = 'RUNNING' AND lease_owner = :o"
                    " AND lease_expires_at > :now"
                ),
                {"o": owner, "now": self.clock.now()},
            )
            return int(found.scalar_one())

    async def claimed(self) -> int:
        """Runs any worker ever claimed (no longer QUEUED)."""
        async with self.admin.engine.connect() as conn:
            found = await conn.execute(text("SELECT count(*) FROM runs WHERE status <> 'QUEUED'"))
            return int(found.scalar_one())

    async def settle(self, expected: dict[str, tuple[int, int]]) -> dict[str, int]:
        """Until every worker's claim loops sleep: ``expected`` maps an owner to (loops,
        runs it must hold). Fails at once when a worker holds more runs, or more loops
        sleep, than expected; returns what each holds once nothing moved for a while."""
        loops = sum(n for n, _ in expected.values())
        stable, last = 0, None
        for _ in range(int(REAL_TIMEOUT / POLL_REAL_SECONDS)):
            held = {owner: await self.held(owner) for owner in expected}
            over = {o: h for o, h in held.items() if h > expected[o][1]}
            assert not over, f"held more runs than configured: {over} (expected {expected})"
            assert self.time.sleeping <= loops, (
                f"{self.time.sleeping} claim loops asleep, {loops} configured"
            )
            state = (tuple(sorted(held.items())), self.time.sleeping)
            done = self.time.sleeping == loops and all(held[o] == expected[o][1] for o in expected)
            stable = stable + 1 if done and state == last else 0
            last = state
            if stable >= SETTLE_POLLS:
                return held
            await asyncio.sleep(POLL_REAL_SECONDS)
        raise AssertionError(
            f"the workers never settled at {expected}: held {last}, {self.time.sleeping} asleep"
        )

    async def runs(self, owner: str) -> list[Any]:
        async with self.admin.engine.connect() as conn:
            found = await conn.execute(
                text("SELECT * FROM runs WHERE lease_owner = :o ORDER BY id"), {"o": owner}
            )
            return list(found.all())


@pytest.fixture
async def env(pg_url: str) -> AsyncIterator[Env]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=10)
    clock = VirtualClock(START)
    time = ManualTime(clock)
    try:
        await seed_durable(admin, [WHO])
        yield Env(admin, clock, time)
    finally:
        time.detach()
        await admin.dispose()


async def serving(roles: list[RunWorkerRole]) -> tuple[asyncio.Event, list[asyncio.Task[None]]]:
    """Each role served as the ``run-worker`` command serves it."""
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(r.worker.serve(r.slots, stop)) for r in roles]
    await asyncio.sleep(0)
    return stop, tasks


async def stopped(
    env: Env, stop: asyncio.Event, tasks: list[asyncio.Task[None]], roles: list[RunWorkerRole]
) -> None:
    """Stop and hand every held run back at once (``release``, whatever the drain), wake
    the idle loops, and wait (real time, bounded) for ``serve`` to end."""
    stop.set()
    for role in roles:
        role.worker.release()
    await asyncio.sleep(0)
    env.time.advance(DRAIN_SECONDS)
    done, pending = await asyncio.wait(tasks, timeout=REAL_TIMEOUT)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert not pending, "serve did not return once its runs were released"
    for task in done:
        task.result()


@pytest.mark.gate(GATE)
async def test_each_worker_runs_the_claim_loops_its_class_is_configured_with(env: Env) -> None:
    # A fleet large enough that capacity never binds: each worker holds one run per loop.
    configured = settings(
        TOTAL_SLOTS="8",
        INTERACTIVE_RESERVED_SLOTS="2",
        ASYNC_RESERVED_SLOTS="1",
        INTERACTIVE_SLOTS="3",
        ASYNC_SLOTS="2",
    )
    await env.queue(RunPriority.ASYNC, 5)
    await env.queue(RunPriority.INTERACTIVE, 5)
    interactive = env.worker(configured, RunPriority.INTERACTIVE, "interactive-1")
    async_worker = env.worker(configured, RunPriority.ASYNC, "async-1")
    assert (interactive.slots, async_worker.slots) == (3, 2)
    stop, tasks = await serving([interactive, async_worker])
    try:
        held = await env.settle({"interactive-1": (3, 3), "async-1": (2, 2)})
    finally:
        await stopped(env, stop, tasks, [interactive, async_worker])
    assert held == {"interactive-1": 3, "async-1": 2}, held
    # No loop beyond the configured ones ever claimed.
    assert await env.claimed() == 5


@pytest.mark.gate(GATE)
async def test_the_configured_reserves_cap_each_class(env: Env) -> None:
    # More loops than either class may use: the configured reserves decide what is held.
    configured = settings(
        TOTAL_SLOTS="4",
        INTERACTIVE_RESERVED_SLOTS="2",
        ASYNC_RESERVED_SLOTS="1",
        INTERACTIVE_SLOTS="4",
        ASYNC_SLOTS="4",
    )
    await env.queue(RunPriority.ASYNC, 5)
    await env.queue(RunPriority.INTERACTIVE, 5)
    async_worker = env.worker(configured, RunPriority.ASYNC, "async-capped")
    stop, tasks = await serving([async_worker])
    try:
        # Async work may hold TOTAL - INTERACTIVE_RESERVED = 2; two loops poll idle.
        held = await env.settle({"async-capped": (4, 2)})
    finally:
        await stopped(env, stop, tasks, [async_worker])
    assert held == {"async-capped": 2}, held
    # The async runs were released (fenced): they hold no slot now.
    interactive = env.worker(configured, RunPriority.INTERACTIVE, "interactive-capped")
    stop, tasks = await serving([interactive])
    try:
        # Interactive work may hold TOTAL - ASYNC_RESERVED = 3; one loop polls idle.
        held = await env.settle({"interactive-capped": (4, 3)})
    finally:
        await stopped(env, stop, tasks, [interactive])
    assert held == {"interactive-capped": 3}, held


@pytest.mark.rule(FENCING)
async def test_a_stop_drains_for_the_configured_seconds_then_releases(env: Env) -> None:
    configured = settings(ASYNC_SLOTS="2")
    await env.queue(RunPriority.ASYNC, 3)
    role = env.worker(configured, RunPriority.ASYNC, "draining")
    assert role.worker.settings.drain_seconds == DRAIN_SECONDS
    stop, tasks = await serving([role])
    try:
        await env.settle({"draining": (2, 2)})
        stopped_at = env.clock.now()
        stop.set()
        await asyncio.sleep(POLL_REAL_SECONDS * SETTLE_POLLS)
        # A microsecond before the drain timeout: still held, serve still serving.
        env.time.advance(DRAIN_SECONDS - 1e-6)
        await asyncio.sleep(POLL_REAL_SECONDS * SETTLE_POLLS)
        assert not tasks[0].done(), "serve returned before its held runs were released"
        assert await env.held("draining") == 2, "a held run was released before the drain"
        env.time.advance(1e-6)
        done, _ = await asyncio.wait(tasks, timeout=REAL_TIMEOUT)
        assert done, "serve did not return at the drain timeout"
        tasks[0].result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    released_at = stopped_at + timedelta(seconds=DRAIN_SECONDS)
    rows = await env.runs("draining")
    assert len(rows) == 2, rows
    async with env.admin.begin() as uow:
        last = {row.id: (await uow.runs.checkpoints(row.id))[-1] for row in rows}
    for row in rows:
        assert str(row.status).endswith(RunStatus.RUNNING.value), row
        assert row.lease_expires_at <= released_at, f"lease not released: {row}"
        assert row.fencing_token == 1, row
        assert last[row.id].state["charged"] is True, last[row.id]
        assert last[row.id].state["wait_until"], last[row.id]
    # Another worker built from the same settings reclaims each at once.
    successor = env.worker(configured, RunPriority.ASYNC, "successor")
    reclaimed = set()
    for _ in rows:
        claimed = await successor.queue.claim("successor", env.clock.now(), 60)
        assert claimed is not None, "a released run was not reclaimable at once"
        assert claimed.recovered
        assert claimed.lease.fencing_token == 2
        assert claimed.checkpoint is not None
        assert claimed.checkpoint.seq == last[claimed.run.id].seq
        reclaimed.add(claimed.run.id)
    assert reclaimed == {row.id for row in rows}
