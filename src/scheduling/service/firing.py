"""``PortMaterializationStore``: the materializer's store composed from the ordinary
ports (repositories of the unit of work, the principal directory, the agent registry).

Used with the in-memory unit of work and with static directories; a PostgreSQL
deployment with the durable directories uses the one-statement-per-step store
(``scheduling.adapters.postgres.materialization``). The principal and agent reads go
through the directories, which may open their own transactions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.directories import AgentRegistry, SchedulePrincipalDirectory
from scheduling.ports.materialization import Decision, FiringContext, QueuedRun
from scheduling.ports.records import ProcessEvent
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork


class PortMaterializationStore:
    """See ``scheduling.ports.materialization.MaterializationStore``."""

    def __init__(self, principals: SchedulePrincipalDirectory, agents: AgentRegistry) -> None:
        self._principals = principals
        self._agents = agents

    async def lock_due(
        self, uow: UnitOfWork, schedule_id: UUID, now: datetime
    ) -> tuple[Schedule, ScheduleRevision] | None:
        schedule = await uow.schedules.lock_due(schedule_id, now)
        if schedule is None:
            return None
        revision = await uow.schedules.get_revision(schedule_id, schedule.current_revision, None)
        return schedule, revision

    async def context(
        self, uow: UnitOfWork, schedule: Schedule, revision: ScheduleRevision
    ) -> FiringContext:
        authority = await self._principals.current(schedule.tenant_id, schedule.principal_id)
        agent = await self._agents.get(revision.agent_id, revision.agent_version)
        latest = await uow.occurrences.latest(schedule.id, OccurrenceDisposition.MATERIALIZED)
        status = None
        if latest is not None and latest.run_id is not None:
            status = (await uow.runs.get(latest.run_id, None)).status
        return FiringContext(authority, agent, status)

    async def decide(self, uow: UnitOfWork, decision: Decision) -> ScheduleOccurrence:
        # One write per port call, in the order before ADR 2330: occurrence, run,
        # advance with its events, outcome row.
        stored = await uow.occurrences.insert(decision.occurrence)
        if stored.id != decision.occurrence.id:
            return stored
        if decision.run is not None:
            await self._create_run(uow, decision.run)
        await self.advance(uow, decision.advance, decision.events)
        if decision.outbox is not None:
            await uow.outbox.append(decision.outbox)
        return stored

    @staticmethod
    async def _create_run(uow: UnitOfWork, queued: QueuedRun) -> None:
        # The order of the transaction before ADR 1700: session, its events, run,
        # checkpoint, then the events that name the run.
        await uow.sessions.create(queued.session)
        for event in queued.events:
            if event.run_id is None:
                await uow.sessions.append_event(event)
        await uow.runs.create(queued.run)
        await uow.runs.add_checkpoint(queued.checkpoint)
        for event in queued.events:
            if event.run_id is not None:
                await uow.sessions.append_event(event)

    async def advance(
        self, uow: UnitOfWork, command: ScheduleCommand, events: Sequence[ProcessEvent]
    ) -> None:
        await uow.schedules.mutate(command)
        for event in events:
            await uow.events.append(event)
