"""The shared contract of ``ScheduleOccurrenceRepository`` (the occurrence ledger)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduling.domain.errors import ConflictError, NotFoundError
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.domain.paging import PageRequest
from scheduling.ports.repositories import DUPLICATE, MISSING_REFERENCE
from scheduling.ports.unit_of_work import UnitOfWorkFactory


async def _schedule(uow_factory: UnitOfWorkFactory, build: Any, owner: Any = None) -> Any:
    schedule, revision = build.schedule(owner or build.alice)
    async with uow_factory.begin() as uow:
        await uow.schedules.create(schedule, revision)
        await uow.commit()
    return schedule


class TestScheduleOccurrenceRepositoryContract:
    async def test_insert_is_idempotent_on_the_natural_key(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule = await _schedule(uow_factory, build)
        first = build.missed(schedule, build.t0)
        retry = build.missed(schedule, build.t0)  # a second worker's attempt, new id
        async with uow_factory.begin() as uow:
            assert await uow.occurrences.insert(first) == first
            await uow.commit()
        async with uow_factory.begin() as uow:
            stored = await uow.occurrences.insert(retry)
            assert stored == first
            assert stored.id != retry.id
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            page = await uow.occurrences.list(schedule.id, build.alice, PageRequest())
            assert [o.id for o in page.items] == [first.id]

    async def test_links_are_checked_at_commit_not_at_insert(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule = await _schedule(uow_factory, build)
        session = build.session(schedule_id=schedule.id)
        run = build.run(session)
        occurrence = build.materialized(schedule, build.t0, session.id, run.id)
        # The natural-key occurrence goes in before its session and run (deferred links).
        async with uow_factory.begin() as uow:
            await uow.occurrences.insert(occurrence)
            await uow.sessions.create(session)
            await uow.runs.create(run)
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.occurrences.for_run(run.id) == occurrence
        # Without them, commit fails and nothing is written.
        dangling = build.materialized(
            schedule, build.t0 + timedelta(days=1), build.ids.next(), build.ids.next()
        )
        async with uow_factory.begin() as uow:
            await uow.occurrences.insert(dangling)
            with pytest.raises(ConflictError) as caught:
                await uow.commit()
        assert caught.value.code == MISSING_REFERENCE
        async with uow_factory.begin() as uow:
            with pytest.raises(NotFoundError):
                await uow.occurrences.get(dangling.id, None)

    async def test_one_run_links_at_most_one_occurrence(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule = await _schedule(uow_factory, build)
        session = build.session(schedule_id=schedule.id)
        run = build.run(session)
        async with uow_factory.begin() as uow:
            await uow.sessions.create(session)
            await uow.runs.create(run)
            await uow.occurrences.insert(build.materialized(schedule, build.t0, session.id, run.id))
            await uow.commit()
        async with uow_factory.begin() as uow:
            twin = build.materialized(schedule, build.t0 + timedelta(days=1), session.id, run.id)
            with pytest.raises(ConflictError) as caught:
                await uow.occurrences.insert(twin)
            assert caught.value.code == DUPLICATE

    async def test_history_is_newest_first_paginated_and_principal_scoped(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule = await _schedule(uow_factory, build)
        nominals = [build.t0 + timedelta(days=i) for i in range(5)]
        async with uow_factory.begin() as uow:
            for nominal in nominals:
                await uow.occurrences.insert(build.missed(schedule, nominal))
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            seen, cursor = [], None
            while True:
                page = await uow.occurrences.list(
                    schedule.id, build.alice, PageRequest(limit=2, cursor=cursor)
                )
                seen += [o.nominal_fire_at for o in page.items]
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
            assert seen == sorted(nominals, reverse=True)
            latest = await uow.occurrences.latest(schedule.id)
            assert latest is not None
            assert latest.nominal_fire_at == nominals[-1]
            assert (
                await uow.occurrences.latest(schedule.id, OccurrenceDisposition.MATERIALIZED)
                is None
            )
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                with pytest.raises(NotFoundError):
                    await uow.occurrences.list(schedule.id, intruder, PageRequest())
                with pytest.raises(NotFoundError):
                    await uow.occurrences.get(latest.id, intruder)
