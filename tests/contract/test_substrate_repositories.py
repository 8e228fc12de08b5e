"""Shared contracts of the substrate repositories the scheduler writes through."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.errors import ConflictError, NotFoundError
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.ports.records import ProcessEvent, RunCheckpoint, RunStatus, SessionEvent
from scheduling.ports.repositories import DUPLICATE, STALE
from scheduling.ports.unit_of_work import UnitOfWorkFactory


def _event(session_id: UUID, seq: int, build: Any, *, context_only: bool = False) -> SessionEvent:
    return SessionEvent(
        session_id=session_id,
        seq=seq,
        event_type="message.user" if context_only else "session.created",
        actor="scheduler",
        payload={"n": seq},
        occurred_at=build.t0,
        context_only=context_only,
    )


class TestSessionRepositoryContract:
    async def test_events_append_in_order_and_hide_context_only_on_request(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        session = build.session()
        async with uow_factory.begin(build.alice) as uow:
            await uow.sessions.create(session)
            await uow.sessions.append_event(_event(session.id, 1, build))
            await uow.sessions.append_event(_event(session.id, 2, build, context_only=True))
            await uow.commit()
        async with uow_factory.begin(build.alice) as uow:
            assert await uow.sessions.get(session.id, build.alice) == session
            assert [e.seq for e in await uow.sessions.events(session.id, build.alice)] == [1, 2]
            public = await uow.sessions.events(session.id, build.alice, include_context_only=False)
            assert [e.seq for e in public] == [1]
            with pytest.raises(ConflictError) as caught:
                await uow.sessions.append_event(_event(session.id, 2, build))
            assert caught.value.code == DUPLICATE
        async with uow_factory.begin(build.mallory) as uow:
            with pytest.raises(NotFoundError):
                await uow.sessions.get(session.id, build.mallory)
            assert await uow.sessions.events(session.id, build.mallory) == []

    async def test_erasure_marks_the_occurrence_then_deletes_the_graph(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        session = build.session(schedule_id=schedule.id)
        run = build.run(session)
        occurrence = build.materialized(schedule, build.t0, session.id, run.id)
        event = ProcessEvent(
            id=build.ids.next(),
            tenant_id=schedule.tenant_id,
            principal_id=schedule.principal_id,
            event_type="schedule.occurrence.materialized",
            actor="scheduler",
            payload={"session_id": str(session.id), "run_id": str(run.id)},
            occurred_at=build.t0,
            schedule_id=schedule.id,
        )
        async with uow_factory.begin() as uow:
            await uow.schedules.create(schedule, revision)
            await uow.sessions.create(session)
            await uow.sessions.append_event(_event(session.id, 1, build, context_only=True))
            await uow.runs.create(run)
            await uow.runs.add_checkpoint(RunCheckpoint(run.id, 0, 0, {"step": 0}, build.t0))
            await uow.occurrences.insert(occurrence)
            await uow.events.append(event)
            await uow.commit()
        erased_at = build.t0 + timedelta(days=2)
        async with uow_factory.begin(build.alice) as uow:
            result = await uow.sessions.erase(session.id, build.alice, erased_at)
            await uow.commit()
        assert (result.occurrences_marked, result.runs_deleted, result.events_deleted) == (1, 1, 1)
        async with uow_factory.begin() as uow:
            kept = await uow.occurrences.get(occurrence.id, None)
            assert kept.disposition is OccurrenceDisposition.MATERIALIZED
            assert (kept.session_id, kept.run_id, kept.links_erased_at) == (None, None, erased_at)
            assert kept.materialized_at == occurrence.materialized_at
            assert kept.authority_version == occurrence.authority_version
            assert await uow.schedules.get(schedule.id, None) == schedule
            assert await uow.events.for_schedule(schedule.id) == [event]
            with pytest.raises(NotFoundError):
                await uow.sessions.get(session.id, None)
            with pytest.raises(NotFoundError):
                await uow.runs.get(run.id, None)
            assert await uow.runs.checkpoints(run.id) == []

    async def test_erasure_of_a_foreign_session_is_not_found(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        session = build.session()
        async with uow_factory.begin() as uow:
            await uow.sessions.create(session)
            await uow.commit()
        async with uow_factory.begin(build.mallory) as uow:
            with pytest.raises(NotFoundError):
                await uow.sessions.erase(session.id, build.mallory, build.t0)
        async with uow_factory.begin() as uow:
            assert await uow.sessions.get(session.id, None) == session


class TestRunRepositoryContract:
    async def test_runs_round_trip_and_save_is_fenced(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        session = build.session()
        run = build.run(session)
        async with uow_factory.begin() as uow:
            await uow.sessions.create(session)
            await uow.runs.create(run)
            await uow.runs.add_checkpoint(RunCheckpoint(run.id, 0, 0, {"seed": True}, build.t0))
            await uow.commit()
        leased = replace(
            run,
            status=RunStatus.RUNNING,
            lease_owner="worker-1",
            lease_expires_at=build.t0 + timedelta(minutes=1),
            fencing_token=1,
        )
        async with uow_factory.begin() as uow:
            assert await uow.runs.get(run.id, build.alice) == run
            await uow.runs.save(leased, expected_fencing_token=0)
            with pytest.raises(ConflictError) as caught:
                await uow.runs.save(leased, expected_fencing_token=0)
            assert caught.value.code == STALE
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.runs.get(run.id, None) == leased
            assert [c.seq for c in await uow.runs.checkpoints(run.id)] == [0]
        async with uow_factory.begin(build.bob) as uow:
            with pytest.raises(NotFoundError):
                await uow.runs.get(run.id, build.bob)

    async def test_get_many_returns_only_the_visible_runs_by_id(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        mine = build.session()
        theirs = build.session(build.mallory)  # another tenant, same principal id
        colleague = build.session(build.bob)  # same tenant, another principal
        runs = [build.run(mine), build.run(mine)]
        foreign, beside = build.run(theirs), build.run(colleague)
        async with uow_factory.begin() as uow:
            for session in (mine, theirs, colleague):
                await uow.sessions.create(session)
            for run in (*runs, foreign, beside):
                await uow.runs.create(run)
            await uow.commit()
        unknown = build.ids.next()
        asked = [runs[0].id, foreign.id, unknown, beside.id, runs[1].id]
        async with uow_factory.begin(build.alice) as uow:
            found = await uow.runs.get_many(asked, build.alice)
            assert found == {run.id: run for run in runs}
            assert await uow.runs.get_many([], build.alice) == {}
        async with uow_factory.begin(build.mallory) as uow:
            assert await uow.runs.get_many(asked, build.mallory) == {foreign.id: foreign}
        async with uow_factory.begin() as uow:
            # No principal (a role's read): every stored run, still none for unknown ids.
            assert set(await uow.runs.get_many(asked, None)) == set(asked) - {unknown}
