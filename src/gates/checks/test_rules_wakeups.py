"""``rule.wakeup.at_commit`` on PostgreSQL: a create's scheduler wake-up is delivered
iff the create's unit of work commits (ADR 2310).

The service is built by the composition root over ``scheduling.testing.open_storage``;
a raw asyncpg connection LISTENs on the channel the schedulers listen on.

* A committed create: exactly one notification, whose payload is the new schedule's
  id, and it arrives only once the schedule row is committed (read on another
  connection when the notification is handled).
* A create whose COMMIT never happens (the API role's unit of work crashes in place of
  its commit, after every write and after the wake-up was queued): no notification,
  and no schedule row.

* An update and a resume, the other writes that can make a schedule due sooner, each
  wake the listener once more with the schedule's id.
* The scheduler production builds (its accountant's sweep wired) acts on the wake: a
  schedule made due while it sleeps gets a pass at once, not at the next accounting
  piece or poll.

Tests of the test: ``scheduling-gates mutate`` (``wakeups.at_commit_dropped``: no
notification at all; ``wakeups.sent_before_commit``: sent on a connection of its own
when queued, so before the COMMIT and whether or not it happens;
``wakeups.resume_silent``: a resume wakes nobody).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory
from scheduling.service.schedule_worker import WorkerSettings
from scheduling.testing import SystemClock, open_storage, to_asyncpg_url
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import ServiceWorld, build_world, definition, principal, seed_durable

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.wakeup.at_commit")]

# The channel a scheduler's wake listener LISTENs on (docs/architecture.md, ADR 2310):
# spelled here, not imported, so the check does not reach into the adapters.
CHANNEL = "scheduling_schedule_changed"
ALICE = principal("wakeup-alice")
SETTLE = 0.5  # seconds given to a notification that must not come


class Crash(Exception):
    """An injected crash in place of the unit of work's COMMIT."""


class _NoCommit:
    """A unit of work whose ``commit`` crashes without committing: leaving the block
    rolls the inner unit back, as a process dying before its COMMIT would."""

    def __init__(self, inner: UnitOfWork) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self) -> None:
        raise Crash("crash before COMMIT")

    async def __aenter__(self) -> _NoCommit:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._inner.__aexit__(*exc)


class _NoCommitFactory:
    def __init__(self, inner: UnitOfWorkFactory) -> None:
        self._inner = inner

    def begin(self, *args: Any, **kwargs: Any) -> _NoCommit:
        return _NoCommit(self._inner.begin(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Heard:
    """Payloads a LISTEN connection received, and whether each schedule row was
    visible (committed) to a second connection when its notification was handled."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.payloads: list[str] = []
        self.visible: list[bool] = []
        self.done = asyncio.Event()
        self._pending: set[asyncio.Task[None]] = set()

    def __call__(self, *args: Any) -> None:
        payload = str(args[-1])
        self.payloads.append(payload)
        task = asyncio.get_running_loop().create_task(self._look(payload))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _look(self, payload: str) -> None:
        found = await self.reader.fetchval(
            "SELECT count(*) FROM schedules WHERE id::text = $1", payload
        )
        self.visible.append(found == 1)
        self.done.set()


@pytest.fixture
async def heard(pg_url: str) -> AsyncIterator[Heard]:
    url = to_asyncpg_url(pg_url).replace("postgresql+asyncpg://", "postgresql://", 1)
    listen, reader = await asyncpg.connect(url), await asyncpg.connect(url)
    ear = Heard(reader)
    await listen.add_listener(CHANNEL, ear)
    try:
        yield ear
    finally:
        await listen.close()
        await reader.close()


async def _world(pg_url: str, crash: bool) -> tuple[ServiceWorld, Any]:
    storage = open_storage(pg_url, pool_size=2)
    await seed_durable(storage.factory("trusted"), [ALICE])
    if crash:
        real = storage.as_role

        def as_role(role: Any) -> Any:
            factory = real(role)
            return _NoCommitFactory(factory) if role == "api" else factory

        # Only the API role's units of work: the create's write is the one crashed.
        object.__setattr__(storage, "as_role", as_role)
    return build_world(storage), storage


async def test_a_committed_create_wakes_a_listener_exactly_once(pg_url: str, heard: Heard) -> None:
    world, storage = await _world(pg_url, crash=False)
    try:
        created = (await world.service.create(ALICE, "wake-1", definition())).schedule
        with contextlib.suppress(TimeoutError):  # none at all: the assertion says so
            await asyncio.wait_for(heard.done.wait(), 5.0)
        await asyncio.sleep(SETTLE)
    finally:
        await storage.close()
    assert heard.payloads == [str(created.id)], "a committed create: not exactly one wake-up"
    assert heard.visible == [True], "the wake-up arrived before the create committed"


async def test_a_create_that_never_commits_wakes_nobody(pg_url: str, heard: Heard) -> None:
    world, storage = await _world(pg_url, crash=True)
    try:
        with pytest.raises(Crash):
            await world.service.create(ALICE, "wake-2", definition())
        await asyncio.sleep(SETTLE)
        rows = await heard.reader.fetchval("SELECT count(*) FROM schedules")
    finally:
        await storage.close()
    assert rows == 0, "the crashed create committed a schedule"
    assert heard.payloads == [], "a create that never committed sent a wake-up"


async def _heard_at_least(heard: Heard, count: int) -> None:
    for _ in range(100):
        if len(heard.payloads) >= count:
            return
        await asyncio.sleep(0.05)


async def test_an_update_and_a_resume_each_wake_a_listener(pg_url: str, heard: Heard) -> None:
    world, storage = await _world(pg_url, crash=False)
    try:
        created = (await world.service.create(ALICE, "wake-3", definition())).schedule
        await _heard_at_least(heard, 1)
        updated = await world.service.update(
            ALICE, created.id, 1, definition(title="Renamed"), None
        )
        await _heard_at_least(heard, 2)
        after_update = list(heard.payloads)
        paused = await world.service.pause(ALICE, created.id, updated.schedule.current_revision)
        await asyncio.sleep(SETTLE)
        before_resume = len(heard.payloads)
        await world.service.resume(ALICE, created.id, paused.schedule.current_revision)
        await _heard_at_least(heard, before_resume + 1)
        await asyncio.sleep(SETTLE)
    finally:
        await storage.close()
    sid = str(created.id)
    assert after_update == [sid, sid], "an update did not wake the listener exactly once"
    resumed = heard.payloads[before_resume:]
    assert resumed == [sid], "a resume did not wake the listener exactly once"


async def test_the_scheduler_production_builds_acts_on_a_wake(pg_url: str) -> None:
    """The scheduler role as production startup builds it (its accountant's sweep wired,
    so its sleep comes in accounting pieces) runs a pass when the notification arrives,
    not at its next accounting piece (30 s) or poll (60 s): a schedule made due while it
    sleeps is handled at once."""
    h = await MaterializeWorld.open(pg_url)
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    role = h.scheduler_role(
        clock=SystemClock(),
        worker_settings=WorkerSettings(fallback_poll_seconds=60, accounting_poll_seconds=30),
    )
    url = to_asyncpg_url(pg_url).replace("postgresql+asyncpg://", "postgresql://", 1)
    notify = await asyncpg.connect(url)
    try:
        assert role.listener is not None, "the scheduler production builds listens"
        sid = await h.create()
        # Out of reach: nothing is due, so the loop sleeps after its first pass.
        await notify.execute(
            "UPDATE schedules SET next_fire_at = now() + interval '1 day' WHERE id = $1", sid
        )
        await role.start()
        worker = role.worker
        task = asyncio.create_task(worker.run(stop))
        assert await settled(lambda: worker.metrics.passes >= 1, 5.0), "no first pass"
        await asyncio.sleep(SETTLE)
        slept = worker.metrics.passes
        await notify.execute(
            "UPDATE schedules SET next_fire_at = now() - interval '1 second' WHERE id = $1", sid
        )
        await notify.execute("SELECT pg_notify($1, $2)", CHANNEL, str(sid))
        woke = await settled(lambda: worker.metrics.passes > slept, 5.0)
        assert woke, "the wake-up did not end the sleep (a pass waited for the sweep or poll)"
    finally:
        stop.set()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await role.close()
        await notify.close()
        await h.close()


async def settled(predicate: Any, seconds: float) -> bool:
    """Poll ``predicate`` every 20 ms for up to ``seconds``."""
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return bool(predicate())
