"""The shared contract of ``ScheduleIdempotencyLedger`` (request idempotency keys)."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.errors import ConflictError
from scheduling.ports.records import IdempotencyEntry
from scheduling.ports.repositories import KEY_REUSED
from scheduling.ports.unit_of_work import UnitOfWorkFactory


def _entry(build: Any, owner: Any, schedule_id: Any, request_hash: str) -> IdempotencyEntry:
    return IdempotencyEntry(
        tenant_id=owner.tenant_id,
        principal_id=owner.principal_id,
        key="create-1",
        request_hash=request_hash,
        schedule_id=schedule_id,
        created_at=build.t0,
    )


class TestScheduleIdempotencyLedgerContract:
    async def test_record_then_replay_returns_the_original(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        entry = _entry(build, build.alice, schedule.id, "sha256:a")
        async with uow_factory.begin(build.alice) as uow:
            assert await uow.idempotency.lookup(build.alice, "create-1") is None
            await uow.schedules.create(schedule, revision)
            assert await uow.idempotency.record(entry) == entry
            await uow.commit()
        other, other_rev = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            assert await uow.idempotency.lookup(build.alice, "create-1") == entry
            await uow.schedules.create(other, other_rev)
            replay = await uow.idempotency.record(_entry(build, build.alice, other.id, "sha256:a"))
            assert replay.schedule_id == schedule.id

    async def test_reused_key_with_other_content_conflicts(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.idempotency.record(_entry(build, build.alice, schedule.id, "sha256:a"))
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            with pytest.raises(ConflictError) as caught:
                await uow.idempotency.record(_entry(build, build.alice, schedule.id, "sha256:b"))
            assert caught.value.code == KEY_REUSED

    async def test_keys_are_scoped_to_tenant_and_principal(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.idempotency.record(_entry(build, build.alice, schedule.id, "sha256:a"))
            await uow.commit()
        for owner in (build.bob, build.mallory):
            theirs, theirs_rev = build.schedule(owner)
            async with uow_factory.begin(owner) as uow:
                assert await uow.idempotency.lookup(owner, "create-1") is None
                await uow.schedules.create(theirs, theirs_rev)
                mine = _entry(build, owner, theirs.id, "sha256:other")
                assert await uow.idempotency.record(mine) == mine
                await uow.commit()
