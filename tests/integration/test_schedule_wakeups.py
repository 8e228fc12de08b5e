"""The schedule wake-up rides the writing unit of work (ADR 2310).

A committed create, update or resume wakes a LISTENer on ``scheduling_schedule_changed``
with the schedule's id; a rolled-back write sends nothing; no connection is opened for
it (asyncpg's connect is made to fail after warm-up, and the wake-up still arrives); a
notification the queue could refuse is skipped rather than failing the write. Each has
its wrong twin: the post-commit sender this replaced opens a connection per write.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from scheduling.adapters.postgres.notify import (
    SCHEDULE_CHANNEL,
    PostgresNotifier,
    PostgresWakeListener,
    PostgresWakeups,
    ReconnectSettings,
)
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import SchedulingError
from scheduling.testing import open_storage
from simulation.worlds.service import ServiceWorld, build_world, definition, principal, seed_durable

pytestmark = pytest.mark.postgres

ALICE = principal("alice")
SETTLE = 0.3  # seconds a listener is given to see a notification that should not come


class Listener:
    """A raw LISTEN connection collecting payloads."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.payloads: list[str] = []
        self.arrived = asyncio.Event()

    def __call__(self, *args: Any) -> None:
        self.payloads.append(str(args[-1]))
        self.arrived.set()

    async def next(self) -> str:
        await asyncio.wait_for(self.arrived.wait(), 5.0)
        self.arrived.clear()
        return self.payloads[-1]


@pytest.fixture
async def listener(pg_url: str) -> AsyncIterator[Listener]:
    conn = await asyncpg.connect(pg_url)
    heard = Listener(conn)
    await conn.add_listener(SCHEDULE_CHANNEL, heard)
    try:
        yield heard
    finally:
        await conn.close()


@pytest.fixture
async def world(pg_url: str) -> AsyncIterator[tuple[ServiceWorld, PostgresUnitOfWorkFactory]]:
    storage = open_storage(pg_url, pool_size=2)
    admin = storage.factory("trusted")
    await seed_durable(admin, [ALICE])
    try:
        yield build_world(storage), admin
    finally:
        await storage.close()


async def test_a_committed_create_update_and_resume_wake_a_listener(
    world: tuple[ServiceWorld, PostgresUnitOfWorkFactory], listener: Listener
) -> None:
    service = world[0].service
    created = (await service.create(ALICE, "k1", definition())).schedule
    assert await listener.next() == str(created.id)
    await service.update(ALICE, created.id, 1, definition(title="Renamed"))
    assert await listener.next() == str(created.id)
    await service.pause(ALICE, created.id, 2)
    await asyncio.sleep(SETTLE)
    assert len(listener.payloads) == 2  # a pause wakes nobody: nothing became due
    await service.resume(ALICE, created.id, 2)
    assert await listener.next() == str(created.id)


async def test_a_refused_create_sends_nothing(
    world: tuple[ServiceWorld, PostgresUnitOfWorkFactory], listener: Listener
) -> None:
    """Validation fails inside the write's unit of work (an unknown agent version is
    found by the in-transaction pin): it rolls back, and no wake-up is delivered."""
    with pytest.raises(SchedulingError):
        await world[0].service.create(ALICE, "k1", definition(agent_version="no-such"))
    await asyncio.sleep(SETTLE)
    assert listener.payloads == []


async def test_a_rolled_back_unit_of_work_sends_nothing(pg_url: str, listener: Listener) -> None:
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    dropped, kept = UUID(int=1), UUID(int=2)
    try:
        async with factory.begin() as uow:
            await uow.wakeups.schedule_changed(dropped)
            await uow.rollback()
        async with factory.begin() as uow:
            await uow.wakeups.schedule_changed(dropped)  # left without commit
        async with factory.begin() as uow:
            await uow.wakeups.schedule_changed(kept)
            await uow.commit()
        assert await listener.next() == str(kept)
        await asyncio.sleep(SETTLE)
        assert listener.payloads == [str(kept)]
    finally:
        await factory.dispose()


async def test_no_connection_is_opened_for_the_wake_up(
    world: tuple[ServiceWorld, PostgresUnitOfWorkFactory],
    listener: Listener,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    service = world[0].service
    await service.create(ALICE, "warm", definition())  # the pool holds its connection now
    await listener.next()
    opened: list[str] = []

    async def refused(*args: Any, **kwargs: Any) -> Any:
        opened.append("connect")
        raise OSError("no new connection in this test")

    monkeypatch.setattr(asyncpg, "connect", refused)
    created = (await service.create(ALICE, "k2", definition(title="Second"))).schedule
    assert await listener.next() == str(created.id)
    assert opened == []
    # The wrong twin: the post-commit sender this replaced opens one per write, and its
    # failure is swallowed, so the write itself cannot show it; the counter does.
    await PostgresNotifier("postgresql://unused").schedule_changed(created.id)
    assert opened == ["connect"]


async def test_a_wake_up_the_queue_could_refuse_is_skipped_and_the_write_commits(
    pg_url: str, listener: Listener
) -> None:
    """A full notification queue fails the COMMIT that notifies; above the guard's share
    the wake-up is skipped instead (a guard of 0 stands for a queue that is full)."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    schedule_id = UUID(int=3)
    try:
        async with factory.begin() as uow:
            await PostgresWakeups(uow.tx, max_queue_usage=0.0).schedule_changed(schedule_id)
            await uow.idempotency.lookup(ALICE, "-")  # any statement: the write goes on
            await uow.commit()
        await asyncio.sleep(SETTLE)
        assert listener.payloads == []
        async with factory.begin() as uow:  # the connection went back to the pool sound
            await uow.wakeups.schedule_changed(schedule_id)
            await uow.commit()
        assert await listener.next() == str(schedule_id)
    finally:
        await factory.dispose()


async def test_a_statement_failing_before_the_commit_discards_the_connection(
    pg_url: str,
) -> None:
    """What rides the COMMIT cannot fail by itself; if it did, the transaction would be
    aborted, not committed, and its connection never returns to the pool."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with factory.begin() as uow:
            uow.tx.at_commit("SELECT 1/0")
            with pytest.raises(SchedulingError):
                await uow.commit()
        async with factory.begin() as uow:  # a fresh connection, no aborted transaction
            assert await uow.idempotency.lookup(ALICE, "-") is None
            await uow.commit()
    finally:
        await factory.dispose()


class _Stops:
    """A Clock whose second sleep closes the listener (one failed reconnect, logged)."""

    def __init__(self) -> None:
        self.listener: PostgresWakeListener | None = None
        self.sleeps = 0

    def now(self) -> datetime:  # pragma: no cover - the loop only sleeps
        raise AssertionError("not read")

    async def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        if self.sleeps > 1 and self.listener is not None:
            await self.listener.close()


async def test_a_refused_reconnect_logs_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    clock = _Stops()
    url = f"postgresql://nobody@127.0.0.1:{port}/none"
    listener = PostgresWakeListener(url, clock=clock, reconnect=ReconnectSettings(0.0, 0.0))
    clock.listener = listener
    with caplog.at_level(logging.WARNING, logger="scheduling.adapters.postgres.notify"):
        await listener._reconnect_loop()
    failed = [r for r in caplog.records if "reconnect" in r.getMessage()]
    assert failed
    assert listener.failed_reconnects == len(failed)
    assert not any(r.exc_info for r in failed)
    assert all(r.getMessage().endswith(": refused") for r in failed)
