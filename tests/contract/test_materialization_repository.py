"""Contract suite of the unit of work's materialization repository (memory and
PostgreSQL, trusted scope): the materializer's steps inside one transaction, and the
decision's writes at once (ADR 2330)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduling.domain.errors import ConflictError, NotFoundError
from scheduling.ports.firing import Decision, QueuedRun
from scheduling.ports.records import (
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunStatus,
    SessionEvent,
)
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.outbox import run_finished


def _queued(build: Any, schedule_id: Any) -> QueuedRun:
    session = build.session(schedule_id=schedule_id)
    run = build.run(session)
    events = [
        SessionEvent(session.id, 1, "session.created", "scheduler", {}, build.t0),
        SessionEvent(session.id, 2, "message.user", "scheduler", {"text": "hi"}, build.t0),
        SessionEvent(session.id, 3, "run.queued", "scheduler", {}, build.t0, run_id=run.id),
    ]
    checkpoint = RunCheckpoint(run.id, 0, 0, {"step": 0}, build.t0)
    return QueuedRun(session, events, run, checkpoint)


def _event(build: Any, schedule: Any, event_type: str) -> ProcessEvent:
    return ProcessEvent(
        build.ids.next(), schedule.tenant_id, schedule.principal_id,
        event_type, "scheduler", {}, build.t0, schedule.id,
    )  # fmt: skip


async def _stored(uow_factory: UnitOfWorkFactory, build: Any) -> tuple[Any, Any]:
    schedule, revision = build.schedule()
    async with uow_factory.begin() as uow:
        await uow.schedules.create(schedule, revision)
        await uow.commit()
    return schedule, revision


class TestMaterializationRepositoryContract:
    async def test_the_four_steps_in_one_transaction(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = build.schedule()
        alice = PrincipalRecord(
            tenant_id=build.alice.tenant_id,
            principal_id=build.alice.principal_id,
            enabled=True,
            scopes=frozenset({"schedule.read"}),
            authority_inputs={},
            created_at=build.t0,
            updated_at=build.t0,
        )
        async with uow_factory.begin() as uow:
            await uow.principals.put(alice)
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        queued = _queued(build, schedule.id)
        async with uow_factory.begin() as uow:
            assert await uow.materialization.lock_due(schedule.id, build.t0 - timedelta(1)) is None
            locked = await uow.materialization.lock_due(schedule.id, build.t0)
            assert locked == (schedule, revision)
            # (the seeded agent version's limits are not a full RunLimits: ask for one
            # that does not exist)
            unknown = revision.model_copy(update={"agent_version": "9.9.9"})
            context = await uow.materialization.context(schedule, unknown)
            assert context.authority is not None
            assert context.authority.enabled
            assert context.authority.scopes == frozenset({"schedule.read"})
            assert context.agent is None
            assert context.previous_run_status is None
            await uow.materialization.create_run(queued)
            occurrence = build.materialized(schedule, build.t0, queued.session.id, queued.run.id)
            await uow.occurrences.insert(occurrence)
            updated = schedule.model_copy(update={"next_fire_at": build.t0 + timedelta(days=1)})
            event = ProcessEvent(
                build.ids.next(), schedule.tenant_id, schedule.principal_id,
                "schedule.occurrence.materialized", "scheduler", {}, build.t0, schedule.id,
            )  # fmt: skip
            await uow.materialization.advance(ScheduleCommand(schedule, updated), [event])
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert (await uow.runs.get(queued.run.id, None)).status is RunStatus.QUEUED
            assert await uow.schedules.get(schedule.id, None) == updated
            assert await uow.events.for_schedule(schedule.id) == [event]
            context = await uow.materialization.context(updated, unknown, lock_admission=False)
            assert context.previous_run_status is RunStatus.QUEUED

    # ``decide`` (ADR 2330): every write of a new occurrence at once; none for an
    # instant already decided; a stale advance raises.

    async def test_a_new_occurrence_writes_everything_and_a_decided_instant_nothing(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, _ = await _stored(uow_factory, build)
        first = _queued(build, schedule.id)
        occurrence = build.materialized(schedule, build.t0, first.session.id, first.run.id)
        updated = schedule.model_copy(update={"next_fire_at": build.t0 + timedelta(days=1)})
        event = _event(build, schedule, "schedule.occurrence.materialized")
        async with uow_factory.begin() as uow:
            command = ScheduleCommand(schedule, updated)
            decision = Decision(occurrence, first, command, [event], None)
            assert await uow.materialization.decide(decision) == occurrence
            await uow.commit()
        # The same instant again (a stale cache): the committed occurrence comes back
        # and nothing of the second decision is written, not even its advance.
        second = _queued(build, schedule.id)
        again = build.materialized(schedule, build.t0, second.session.id, second.run.id)
        later = updated.model_copy(update={"next_fire_at": build.t0 + timedelta(days=2)})
        async with uow_factory.begin() as uow:
            extra = _event(build, schedule, "schedule.occurrence.materialized")
            decision = Decision(again, second, ScheduleCommand(updated, later), [extra], None)
            assert await uow.materialization.decide(decision) == occurrence
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert (await uow.runs.get(first.run.id, None)).status is RunStatus.QUEUED
            with pytest.raises(NotFoundError):
                await uow.runs.get(second.run.id, None)
            assert await uow.schedules.get(schedule.id, None) == updated
            assert await uow.events.for_schedule(schedule.id) == [event]
            assert await uow.outbox.pending(10) == []

    async def test_a_decision_without_a_run_writes_its_outcome_row(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, revision = await _stored(uow_factory, build)
        occurrence = build.missed(schedule, build.t0)
        updated = schedule.model_copy(
            update={"next_fire_at": build.t0 + timedelta(days=1), "consecutive_failures": 1}
        )
        event = _event(build, schedule, "schedule.occurrence.missed")
        outcome = run_finished(schedule, revision, occurrence, build.t0)
        async with uow_factory.begin() as uow:
            command = ScheduleCommand(schedule, updated)
            decision = Decision(occurrence, None, command, [event], outcome)
            assert await uow.materialization.decide(decision) == occurrence
            await uow.commit()
        async with uow_factory.begin() as uow:
            assert await uow.occurrences.get(occurrence.id, None) == occurrence
            assert await uow.schedules.get(schedule.id, None) == updated
            assert await uow.events.for_schedule(schedule.id) == [event]
            assert await uow.outbox.pending(10) == [outcome]

    async def test_a_stale_advance_raises_after_the_writes(
        self, uow_factory: UnitOfWorkFactory, build: Any
    ) -> None:
        schedule, _ = await _stored(uow_factory, build)
        queued = _queued(build, schedule.id)
        occurrence = build.materialized(schedule, build.t0, queued.session.id, queued.run.id)
        stale = schedule.model_copy(update={"consecutive_failures": 2})
        updated = stale.model_copy(update={"next_fire_at": build.t0 + timedelta(days=1)})
        event = _event(build, schedule, "schedule.occurrence.materialized")
        async with uow_factory.begin() as uow:
            decision = Decision(occurrence, queued, ScheduleCommand(stale, updated), [event], None)
            with pytest.raises(ConflictError):
                await uow.materialization.decide(decision)
        async with uow_factory.begin() as uow:
            assert await uow.schedules.get(schedule.id, None) == schedule
            assert await uow.events.for_schedule(schedule.id) == []
            with pytest.raises(NotFoundError):
                await uow.occurrences.get(occurrence.id, None)
