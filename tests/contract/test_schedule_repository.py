"""The shared contract of ``ScheduleRepository`` (the spec's definition port)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduling.domain.errors import ConflictError, NotFoundError, ValidationError
from scheduling.domain.paging import INVALID_CURSOR, PageRequest
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.records import RunStatus
from scheduling.ports.repositories import (
    DUPLICATE,
    NOT_FOUND,
    STALE,
    ScheduleCommand,
    ScheduleListing,
)
from scheduling.ports.unit_of_work import UnitOfWorkFactory


class TestScheduleRepositoryContract:
    async def test_create_then_get_round_trips(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            assert await uow.schedules.create(schedule, revision) == schedule
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            assert await uow.schedules.get(schedule.id, build.alice) == schedule
            stored = await uow.schedules.get_revision(schedule.id, 1, build.alice)
            assert stored == revision
            assert stored.to_definition() == revision.to_definition()

    async def test_get_hides_other_principals_and_tenants(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                with pytest.raises(NotFoundError) as caught:
                    await uow.schedules.get(schedule.id, intruder)
                assert caught.value.code == NOT_FOUND
                with pytest.raises(NotFoundError):
                    await uow.schedules.get_revision(schedule.id, 1, intruder)
                page = await uow.schedules.list(intruder, PageRequest())
                assert page.items == []

    async def test_get_current_is_get_with_its_current_revision(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            current = await uow.schedules.get_current(schedule.id, build.alice)
            assert current == (schedule, revision)
            assert current[1].to_definition() == revision.to_definition()
            with pytest.raises(NotFoundError) as absent:
                await uow.schedules.get_current(build.schedule()[0].id, build.alice)
            assert absent.value.code == NOT_FOUND
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                with pytest.raises(NotFoundError) as caught:
                    await uow.schedules.get_current(schedule.id, intruder)
                assert caught.value.code == NOT_FOUND

    async def test_duplicate_id_conflicts(self, uow_factory: UnitOfWorkFactory, build: Any) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            with pytest.raises(ConflictError) as caught:
                await uow.schedules.create(schedule, revision)
            assert caught.value.code == DUPLICATE

    async def test_list_pages_are_disjoint_complete_and_filtered(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        created = []
        async with uow_factory.begin(build.alice) as uow:
            for i in range(7):
                state = ScheduleState.PAUSED if i % 3 == 0 else ScheduleState.ACTIVE
                # Two rows share each updated_at so the id breaks ties.
                s, r = build.schedule(state=state, updated_at=build.t0 + timedelta(hours=i // 2))
                created.append(await uow.schedules.create(s, r))
            other, other_rev = build.schedule(build.bob)
            await uow.schedules.create(other, other_rev)
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            seen, cursor = [], None
            while True:
                page = await uow.schedules.list(build.alice, PageRequest(limit=3, cursor=cursor))
                assert len(page.items) <= 3
                seen += page.items
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert [s.id for s in seen] == [
                s.id
                for s in sorted(created, key=lambda s: (s.updated_at, s.id.bytes), reverse=True)
            ]
            paused = await uow.schedules.list(
                build.alice, PageRequest(limit=50), frozenset({ScheduleState.PAUSED})
            )
            assert {s.id for s in paused.items} == {
                s.id for s in created if s.state is ScheduleState.PAUSED
            }
            with pytest.raises(ValidationError) as caught:
                await uow.schedules.list(build.alice, PageRequest(cursor="bm90LWEtY3Vyc29y"))
            assert caught.value.code == INVALID_CURSOR

    async def test_get_revisions_reads_a_page_and_hides_foreign_keys(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        mine = [build.schedule() for _ in range(3)]
        foreign, foreign_rev = build.schedule(build.bob)
        async with uow_factory.begin(build.alice) as uow:
            for s, r in mine:
                await uow.schedules.create(s, r)
            await uow.schedules.create(foreign, foreign_rev)
            await uow.commit()
        keys = [(s.id, 1) for s, _ in mine]
        async with uow_factory.begin(build.alice) as uow:
            found = await uow.schedules.get_revisions(
                [*keys, (foreign.id, 1), (mine[0][0].id, 2)], build.alice
            )
            assert found == {(s.id, 1): r for s, r in mine}
            assert await uow.schedules.get_revisions([], build.alice) == {}
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                assert await uow.schedules.get_revisions(keys, intruder) == {}

    async def test_list_summaries_is_list_with_each_current_revisions_fields(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        created = []
        async with uow_factory.begin(build.alice) as uow:
            for i in range(5):
                state = ScheduleState.PAUSED if i % 2 else ScheduleState.ACTIVE
                s, r = build.schedule(state=state, updated_at=build.t0 + timedelta(hours=i // 2))
                await uow.schedules.create(s, r)
                created.append((s, r))
            other, other_rev = build.schedule(build.bob)
            await uow.schedules.create(other, other_rev)
            await uow.commit()
        revisions = {s.id: r for s, r in created}
        async with uow_factory.begin(build.alice) as uow:
            for states in (None, frozenset({ScheduleState.PAUSED})):
                cursor, listed, summarized = None, [], []
                while True:
                    request = PageRequest(limit=2, cursor=cursor)
                    plain = await uow.schedules.list(build.alice, request, states)
                    page = await uow.schedules.list_summaries(build.alice, request, states)
                    assert page.next_cursor == plain.next_cursor
                    listed += plain.items
                    summarized += page.items
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                # Each listing carries its schedule's stored fields as plain values.
                assert [_listed_fields(row) for row in summarized] == [
                    _schedule_fields(s) for s in listed
                ]
                for row in summarized:
                    revision = revisions[row.id]
                    assert (row.title, row.cadence, row.instruction) == (
                        revision.title,
                        revision.cadence,
                        revision.instruction,
                    )
            with pytest.raises(ValidationError) as caught:
                await uow.schedules.list_summaries(
                    build.alice, PageRequest(cursor="bm90LWEtY3Vyc29y")
                )
            assert caught.value.code == INVALID_CURSOR
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                mine = await uow.schedules.list_summaries(intruder, PageRequest())
                assert all(row.principal_id == intruder.principal_id for row in mine.items)
                assert not {row.id for row in mine.items} & set(revisions)

    async def test_mutate_is_compare_and_set(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        later = build.t0 + timedelta(minutes=5)
        paused = schedule.model_copy(
            update={
                "state": ScheduleState.PAUSED,
                "pause_reason": "user",
                "next_fire_at": None,
                "updated_at": later,
            }
        )
        async with uow_factory.begin(build.alice) as uow:
            command = ScheduleCommand(expected=schedule, updated=paused, principal=build.alice)
            assert await uow.schedules.mutate(command) == paused
            await uow.commit()
        # A second writer still holding the old version changes nothing.
        async with uow_factory.begin(build.alice) as uow:
            with pytest.raises(ConflictError) as caught:
                await uow.schedules.mutate(command)
            assert caught.value.code == STALE
            assert caught.value.details["current_revision"] == 1
            assert await uow.schedules.get(schedule.id, build.alice) == paused
        # An update writes revision N+1 beside the control record.
        rev2 = build.revision(schedule.id, 2)
        updated = paused.model_copy(
            update={"current_revision": 2, "updated_at": later + timedelta(1)}
        )
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.mutate(
                ScheduleCommand(
                    expected=paused, updated=updated, principal=build.alice, revision=rev2
                )
            )
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            assert (await uow.schedules.get(schedule.id, build.alice)).current_revision == 2
            assert await uow.schedules.get_revision(schedule.id, 2, build.alice) == rev2
            assert await uow.schedules.get_revision(schedule.id, 1, build.alice) == revision

    async def test_mutate_by_another_principal_is_not_found(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin(build.alice) as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        cancelled = schedule.model_copy(
            update={"state": ScheduleState.CANCELLED, "next_fire_at": None}
        )
        for intruder in (build.bob, build.mallory):
            async with uow_factory.begin(intruder) as uow:
                with pytest.raises(NotFoundError):
                    await uow.schedules.mutate(
                        ScheduleCommand(expected=schedule, updated=cancelled, principal=intruder)
                    )
        async with uow_factory.begin(build.alice) as uow:
            assert (await uow.schedules.get(schedule.id, build.alice)).state is ScheduleState.ACTIVE

    async def test_due_scan_and_next_fire(self, uow_factory: UnitOfWorkFactory, build: Any) -> None:
        t0 = build.t0
        rows = [
            build.schedule(next_fire_at=t0 + timedelta(minutes=2)),
            build.schedule(build.mallory, next_fire_at=t0 - timedelta(minutes=1)),
            build.schedule(next_fire_at=t0),
            build.schedule(state=ScheduleState.PAUSED),
            build.schedule(next_fire_at=t0 + timedelta(hours=1)),
        ]
        async with uow_factory.begin() as uow:
            assert await uow.schedules.next_fire_at() is None
            for s, r in rows:
                await uow.schedules.create(s, r)
            await uow.commit()
        async with uow_factory.begin() as uow:
            due = await uow.schedules.due(t0 + timedelta(minutes=2), 10)
            assert due == [rows[1][0].id, rows[2][0].id, rows[0][0].id]
            assert await uow.schedules.due(t0 + timedelta(minutes=2), 2) == due[:2]
            assert await uow.schedules.due(t0 - timedelta(minutes=1, microseconds=1), 10) == []
            assert await uow.schedules.next_fire_at() == t0 - timedelta(minutes=1)
            assert await uow.schedules.lock_due(rows[0][0].id, t0) is None
            locked = await uow.schedules.lock_due(rows[2][0].id, t0)
            assert locked is not None
            assert locked.id == rows[2][0].id
            assert await uow.schedules.lock_due(rows[3][0].id, t0 + timedelta(days=9)) is None

    async def test_purge_terminal_deletes_only_old_terminal_history(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        t0 = build.t0
        old_done, r1 = build.schedule(state=ScheduleState.COMPLETED, updated_at=t0)
        old_cancel, r2 = build.schedule(state=ScheduleState.CANCELLED, updated_at=t0)
        fresh_done, r3 = build.schedule(
            state=ScheduleState.CANCELLED, updated_at=t0 + timedelta(days=40)
        )
        active, r4 = build.schedule(updated_at=t0)
        foreign, r5 = build.schedule(build.mallory, state=ScheduleState.COMPLETED, updated_at=t0)
        session = build.session(schedule_id=old_done.id)
        run = build.run(session, RunStatus.COMPLETED)
        async with uow_factory.begin() as uow:
            for s, r in (
                (old_done, r1),
                (old_cancel, r2),
                (fresh_done, r3),
                (active, r4),
                (foreign, r5),
            ):
                await uow.schedules.create(s, r)
            await uow.sessions.create(session)
            await uow.runs.create(run)
            occ = await uow.occurrences.insert(build.materialized(old_done, t0, session.id, run.id))
            await uow.occurrences.insert(build.missed(old_cancel, t0))
            await uow.commit()
        async with uow_factory.begin(tenant_id=build.alice.tenant_id) as uow:
            assert await uow.schedules.purge_terminal("tenant-a", t0 + timedelta(days=30), 1) == 1
            assert await uow.schedules.purge_terminal("tenant-a", t0 + timedelta(days=30), 10) == 1
            assert await uow.schedules.purge_terminal("tenant-a", t0 + timedelta(days=30), 10) == 0
            await uow.commit()
        async with uow_factory.begin() as uow:
            for gone in (old_done, old_cancel):
                with pytest.raises(NotFoundError):
                    await uow.schedules.get(gone.id, None)
            with pytest.raises(NotFoundError):
                await uow.occurrences.get(occ.id, None)
            for kept in (fresh_done, active, foreign):
                assert (await uow.schedules.get(kept.id, None)).id == kept.id
            # Sessions and runs are never purged with schedule history.
            assert (await uow.sessions.get(session.id, None)).id == session.id
            assert (await uow.runs.get(run.id, None)).id == run.id


def _schedule_fields(s: Schedule) -> tuple[object, ...]:
    pause = None if s.pause_reason is None else s.pause_reason.value
    return (
        s.id,
        s.tenant_id,
        s.principal_id,
        s.state.value,
        pause,
        s.current_revision,
        s.next_fire_at,
        s.created_at,
        s.updated_at,
    )


def _listed_fields(row: ScheduleListing) -> tuple[object, ...]:
    return tuple(row)[:9]
