"""Contract suite of the unit of work's materialization repository (memory and
PostgreSQL, trusted scope): the materializer's four steps inside one transaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduling.ports.firing import QueuedRun
from scheduling.ports.records import (
    PrincipalRecord,
    ProcessEvent,
    RunCheckpoint,
    RunStatus,
    SessionEvent,
)
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWorkFactory


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
