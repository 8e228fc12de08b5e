"""Contract of the materializer's store (``MaterializationStore``) over each unit of work
(memory and PostgreSQL): the overlap state its context read returns.

Two stores implement the port: the port store the materializer composes from the
ordinary repositories when the storage has no fast path (``PortMaterializationStore``,
in-memory development and application tests), and the store that hands each step to the
unit of work's own materialization repository (``PostgresMaterializationStore``,
production). Both must read overlap from the run of the latest MATERIALIZED occurrence
(spec "Materialization transaction": overlap is checked before the occurrence is
inserted; ``FiringContext.previous_run_status``): an overlap skip or a missed instant
after it has no run and does not end the overlap, and an older materialized run that
finished does not either (``firing.port_overlap_any_disposition``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.schedule import Schedule
from scheduling.ports.firing import Decision, QueuedRun
from scheduling.ports.materialization import MaterializationStore
from scheduling.ports.records import ProcessEvent, RunCheckpoint, RunStatus, SessionEvent
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.firing import PortMaterializationStore
from scheduling.testing import (
    PostgresMaterializationStore,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
)

DAY = timedelta(days=1)


def port_store() -> MaterializationStore:
    return PortMaterializationStore(StaticPrincipalDirectory(), StaticAgentRegistry())


STORES: dict[str, Callable[[], MaterializationStore]] = {
    "port": port_store,
    "repository": PostgresMaterializationStore,
}


def _queued(build: Any, schedule_id: Any, at: datetime) -> QueuedRun:
    session = build.session(schedule_id=schedule_id)
    run = build.run(session)
    events = [
        SessionEvent(session.id, 1, "session.created", "scheduler", {}, at),
        SessionEvent(session.id, 2, "message.user", "scheduler", {"text": "hi"}, at),
        SessionEvent(session.id, 3, "run.queued", "scheduler", {}, at, run_id=run.id),
    ]
    return QueuedRun(session, events, run, RunCheckpoint(run.id, 0, 0, {"step": 0}, at))


def _skipped(build: Any, schedule: Schedule, nominal: datetime) -> ScheduleOccurrence:
    missed = build.missed(schedule, nominal).model_dump()
    missed.update(
        disposition=OccurrenceDisposition.SKIPPED_OVERLAP,
        reason_code="schedule.materialize.overlap",
    )
    return ScheduleOccurrence(**missed)


class TestMaterializationStoreOverlap:
    @pytest.fixture(params=sorted(STORES))
    def store(self, request: pytest.FixtureRequest) -> MaterializationStore:
        return STORES[str(request.param)]()

    async def test_overlap_is_the_latest_materialized_run_across_skips(
        self, uow_factory: UnitOfWorkFactory, build: Any, store: MaterializationStore
    ) -> None:
        schedule, revision = build.schedule()
        async with uow_factory.begin() as uow:
            await uow.schedules.create(schedule, revision)
            await uow.commit()
        current = schedule

        async def decide(kind: str, nominal: datetime) -> tuple[QueuedRun | None, RunStatus | None]:
            """Lock the schedule due at ``nominal``, read its overlap state, then decide
            ``nominal`` as ``kind`` and advance a day; the status read before."""
            nonlocal current
            async with uow_factory.begin() as uow:
                locked = await store.lock_due(uow, current.id, nominal)
                assert locked is not None, nominal
                # (the seeded agent version's limits are not a full RunLimits: ask for
                # one that does not exist; only the overlap state is read here)
                locked_schedule, locked_revision = locked
                unknown = locked_revision.model_copy(update={"agent_version": "9.9.9"})
                context = await store.context(uow, locked_schedule, unknown)
                held = context.previous_run_status
                queued = None
                if kind == "materialized":
                    queued = _queued(build, current.id, nominal)
                    occurrence = build.materialized(
                        current, nominal, queued.session.id, queued.run.id
                    )
                elif kind == "skipped":
                    occurrence = _skipped(build, current, nominal)
                else:
                    occurrence = build.missed(current, nominal)
                updated = current.model_copy(update={"next_fire_at": nominal + DAY})
                event = ProcessEvent(
                    build.ids.next(), current.tenant_id, current.principal_id,
                    f"schedule.occurrence.{kind}", "scheduler", {}, nominal, current.id,
                )  # fmt: skip
                decision = Decision(
                    occurrence, queued, ScheduleCommand(current, updated), [event], None
                )
                assert await store.decide(uow, decision) == occurrence
                await uow.commit()
            current = updated
            return queued, held

        t0 = build.t0
        first, held = await decide("materialized", t0)
        assert held is None
        assert first is not None
        # The first run finished before the next instant.
        async with uow_factory.begin() as uow:
            done = dataclasses.replace(
                first.run,
                status=RunStatus.COMPLETED,
                finished_at=t0 + timedelta(hours=1),
                updated_at=t0 + timedelta(hours=1),
            )
            await uow.runs.save(done, expected_fencing_token=0)
            await uow.commit()
        second, held = await decide("materialized", t0 + DAY)
        assert held is RunStatus.COMPLETED
        assert second is not None
        # The second run is still QUEUED at each later instant: the skips and the missed
        # instant between have no run, and the finished first run is older.
        seen = []
        for n, kind in enumerate(("skipped", "skipped", "missed", "skipped"), start=2):
            _, held = await decide(kind, t0 + n * DAY)
            seen.append(held)
        assert seen == [RunStatus.QUEUED] * 4
