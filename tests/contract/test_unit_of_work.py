"""The shared contract of the unit of work: one transaction, rolled back unless committed."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.errors import NotFoundError, UnavailableError
from scheduling.ports.repositories import CLOSED
from scheduling.ports.unit_of_work import UnitOfWorkFactory


class _Boom(Exception):
    pass


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
