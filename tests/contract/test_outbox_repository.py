"""Contract suite of the OutboxRepository (memory and PostgreSQL, trusted scope)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage
from scheduling.ports.unit_of_work import UnitOfWorkFactory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def message(n: int, at: datetime = T0) -> OutboxMessage:
    return OutboxMessage(
        id=UUID(int=n),
        tenant_id="tenant-a",
        principal_id="alice",
        schedule_id=UUID(int=1000),
        occurrence_id=UUID(int=2000 + n),
        kind=RUN_FINISHED,
        payload={"title": f"T{n}", "nominal_fire_at": "2026-03-01T12:00:00Z"},
        created_at=at,
    )


class TestOutboxRepositoryContract:
    async def test_append_is_idempotent_by_id(self, uow_factory: UnitOfWorkFactory) -> None:
        async with uow_factory.begin() as uow:
            assert await uow.outbox.append(message(1))
            assert not await uow.outbox.append(message(1))
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.outbox.pending(10) == [message(1)]

    async def test_pending_is_oldest_first_and_bounded(
        self, uow_factory: UnitOfWorkFactory
    ) -> None:
        async with uow_factory.begin() as uow:
            for n in (3, 1, 2):
                await uow.outbox.append(message(n, T0 + timedelta(seconds=n)))
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert [m.id.int for m in await uow.outbox.pending(2)] == [1, 2]

    async def test_mark_delivered_once(self, uow_factory: UnitOfWorkFactory) -> None:
        async with uow_factory.begin() as uow:
            await uow.outbox.append(message(1))
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.outbox.mark_delivered(UUID(int=1), T0)
            assert not await uow.outbox.mark_delivered(UUID(int=1), T0 + timedelta(seconds=1))
            assert not await uow.outbox.mark_delivered(UUID(int=9), T0)
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.outbox.pending(10) == []
