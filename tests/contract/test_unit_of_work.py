"""The shared contract of the unit of work: one transaction, rolled back unless committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from scheduling.adapters.postgres.notify import SCHEDULE_CHANNEL
from scheduling.domain.errors import NotFoundError, UnavailableError
from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage
from scheduling.ports.records import IdempotencyEntry, PrincipalRecord, ProcessEvent, RunStatus
from scheduling.ports.repositories import CLOSED
from scheduling.ports.unit_of_work import UnitOfWorkFactory

AGENT = UUID("00000000-0000-4000-8000-00000000a9e1")  # seeded by conftest


class _Boom(Exception):
    pass


Delivered = Callable[[int], Awaitable[list[str]]]


@pytest.fixture
async def delivered(
    request: pytest.FixtureRequest, uow_factory: UnitOfWorkFactory
) -> AsyncIterator[Delivered]:
    """The wake-ups delivered so far, as each adapter delivers them: the memory store's
    list, or a LISTEN connection on PostgreSQL's channel. ``delivered(n)`` waits (5 s
    at most) for ``n`` and then a moment for any that should not come."""
    if request.node.callspec.params["uow_factory"] == "memory":
        store: Any = getattr(uow_factory, "store")  # noqa: B009 - the memory adapter's own

        async def from_store(expected: int) -> list[str]:
            return [str(u) for u in store.wakeups]

        yield from_store
        return
    conn = await asyncpg.connect(request.getfixturevalue("pg_url"))
    heard: list[str] = []
    await conn.add_listener(SCHEDULE_CHANNEL, lambda *args: heard.append(str(args[-1])))

    async def listened(expected: int) -> list[str]:
        for _ in range(100):
            if len(heard) >= expected:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        return list(heard)

    try:
        yield listened
    finally:
        await conn.close()


class TestScheduleWakeupsContract:
    async def test_a_wake_up_is_delivered_when_its_unit_of_work_commits(
        self, uow_factory: UnitOfWorkFactory, build: Any, delivered: Delivered
    ) -> None:
        first, second = UUID(int=11), UUID(int=12)
        async with uow_factory.begin(build.alice) as uow:
            await uow.wakeups.schedule_changed(first)
            await uow.wakeups.schedule_changed(second)
            await uow.wakeups.schedule_changed(first)  # the same one twice: one delivery
            assert await delivered(0) == []  # nothing before the commit
            await uow.commit()
        assert await delivered(2) == [str(first), str(second)]

    async def test_a_wake_up_is_dropped_when_its_unit_of_work_rolls_back(
        self, uow_factory: UnitOfWorkFactory, build: Any, delivered: Delivered
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.wakeups.schedule_changed(schedule.id)
            await uow.rollback()

        async def wake_then_fail() -> None:
            async with uow_factory.begin(build.alice) as uow:
                await uow.wakeups.schedule_changed(schedule.id)
                raise _Boom

        with pytest.raises(_Boom):
            await wake_then_fail()
        assert await delivered(1) == []


class TestUnitOfWorkContract:
    async def test_leaving_without_commit_rolls_back(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            assert await uow.schedules.get(schedule.id, build.alice) == schedule
        async with uow_factory.begin(build.alice) as uow:
            with pytest.raises(NotFoundError):
                await uow.schedules.get(schedule.id, build.alice)

    async def test_an_exception_rolls_back_every_repository(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        session = build.session(schedule_id=schedule.id)

        async def write_then_fail() -> None:
            async with uow_factory.begin() as uow:
                await uow.schedules.create(schedule, revision)
                await uow.sessions.create(session)
                await uow.occurrences.insert(build.missed(schedule, build.t0))
                raise _Boom

        with pytest.raises(_Boom):
            await write_then_fail()
        async with uow_factory.begin() as uow:
            with pytest.raises(NotFoundError):
                await uow.schedules.get(schedule.id, None)
            with pytest.raises(NotFoundError):
                await uow.sessions.get(session.id, None)

    async def test_a_unit_of_work_is_single_use(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        uow = uow_factory.begin(build.alice)
        async with uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
            with pytest.raises(UnavailableError) as caught:
                await uow.schedules.get(schedule.id, build.alice)
            assert caught.value.code == CLOSED
        with pytest.raises(UnavailableError):
            async with uow:
                pass
        async with uow_factory.begin(build.alice) as fresh:
            assert await fresh.schedules.get(schedule.id, build.alice) == schedule

    async def test_every_repository_joins_the_one_transaction(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        session = build.session(schedule_id=schedule.id)
        run = build.run(session)
        principal = PrincipalRecord("tenant-a", "carol", True, frozenset(), {}, build.t0, build.t0)
        event = ProcessEvent(
            build.ids.next(),
            "tenant-a",
            "alice",
            "schedule.created",
            "api",
            {},
            build.t0,
            schedule.id,
        )
        async with uow_factory.begin() as uow:
            await uow.principals.put(principal)
            await uow.agents.set_active(AGENT, "1.0.0", build.t0)
            await uow.schedules.create(schedule, revision)
            await uow.idempotency.record(
                IdempotencyEntry("tenant-a", "alice", "k", "h", schedule.id, build.t0)
            )
            await uow.sessions.create(session)
            await uow.runs.create(run)
            await uow.occurrences.insert(build.materialized(schedule, build.t0, session.id, run.id))
            await uow.events.append(event)
            await uow.wakeups.schedule_changed(schedule.id)
            outcome = OutboxMessage(
                UUID(int=77), "tenant-a", "alice", schedule.id, UUID(int=78), RUN_FINISHED,
                {"title": "t", "nominal_fire_at": "2026-03-01T12:00:00Z"}, build.t0,
            )  # fmt: skip
            assert await uow.outbox.append(outcome)
            # Each write is visible inside the transaction...
            assert await uow.principals.get("tenant-a", "carol") == principal
            assert (await uow.agents.active(AGENT)) is not None
            assert await uow.events.for_schedule(schedule.id) == [event]
            await uow.rollback()
        # ...and none of them outside it after the rollback.
        async with uow_factory.begin() as uow:
            assert await uow.principals.get("tenant-a", "carol") is None
            assert await uow.agents.active(AGENT) is None
            assert await uow.idempotency.lookup(build.alice, "k") is None
            assert await uow.events.for_schedule(schedule.id) == []
            assert await uow.outbox.pending(10) == []
            assert await uow.occurrences.for_run(run.id) is None
            with pytest.raises(NotFoundError):
                await uow.runs.get(run.id, None)

    async def test_admission_and_pending_accounts_join_the_transaction(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        session = build.session(schedule_id=schedule.id)
        tag = {"schedule_id": str(schedule.id)}
        active = replace(build.run(session), metadata=tag)
        done = replace(
            build.run(session), status=RunStatus.COMPLETED, finished_at=build.t0, metadata=tag
        )
        async with uow_factory.begin() as uow:
            await uow.schedules.create(schedule, revision)
            await uow.sessions.create(session)
            await uow.runs.create(active)
            await uow.runs.create(done)
            await uow.occurrences.insert(
                build.materialized(schedule, build.t0, session.id, done.id)
            )
            # The uncommitted rows are what the transaction's own reads see...
            usage = await uow.admission.usage(build.alice.tenant_id, build.t0)
            assert (usage.active_runs, usage.materialized_last_minute) == (1, 2)
            assert await uow.pending_accounts.pending(10) == [done.id]
            assert await uow.materialization.lock_due(schedule.id, build.t0) == (schedule, revision)
            await uow.rollback()
        # ...and nothing once rolled back.
        async with uow_factory.begin() as uow:
            usage = await uow.admission.usage(build.alice.tenant_id, build.t0)
            assert (usage.active_runs, usage.materialized_last_minute) == (0, 0)
            assert await uow.pending_accounts.pending(10) == []
