"""In-memory ``MaterializationRepository``: the materializer's steps composed from the
unit of work's own repositories (authority and agent version from its principal and
agent tables, as the durable directories read them)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.directories import AgentSpec, AuthoritySnapshot, authority_version
from scheduling.ports.firing import Decision, FiringContext, QueuedRun
from scheduling.ports.records import ProcessEvent
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork


class MemoryMaterializationRepository:
    """See ``scheduling.ports.firing.MaterializationRepository``."""

    def __init__(self, uow: UnitOfWork) -> None:
        # The memory unit of work passes itself while it is being built: only its
        # repositories are read, and only once a step runs.
        self._uow = uow

    async def lock_due(
        self, schedule_id: UUID, now: datetime, *, lock_admission: bool = True
    ) -> tuple[Schedule, ScheduleRevision] | None:
        schedule = await self._uow.schedules.lock_due(schedule_id, now)
        if schedule is None:
            return None
        revision = await self._uow.schedules.get_revision(
            schedule_id, schedule.current_revision, None
        )
        return schedule, revision

    async def context(
        self, schedule: Schedule, revision: ScheduleRevision, *, lock_admission: bool = True
    ) -> FiringContext:
        uow = self._uow
        principal = await uow.principals.get(schedule.tenant_id, schedule.principal_id)
        authority = None
        if principal is not None:
            scopes = frozenset(principal.scopes)
            authority = AuthoritySnapshot(
                tenant_id=principal.tenant_id,
                principal_id=principal.principal_id,
                enabled=principal.enabled,
                scopes=scopes,
                authority_version=authority_version(
                    principal.tenant_id,
                    principal.principal_id,
                    principal.enabled,
                    scopes,
                    principal.authority_inputs,
                ),
            )
        record = await uow.agents.get_version(revision.agent_id, revision.agent_version)
        agent = None
        if record is not None:
            agent = AgentSpec(
                agent_id=record.agent_id,
                version=record.version,
                policy_profile=record.policy_profile,
                limits=RunLimits.model_validate(record.limits),
                content_hash=record.content_hash,
            )
        latest = await uow.occurrences.latest(schedule.id, OccurrenceDisposition.MATERIALIZED)
        status = None
        if latest is not None and latest.run_id is not None:
            status = (await uow.runs.get(latest.run_id, None)).status
        return FiringContext(authority, agent, status)

    async def create_run(self, queued: QueuedRun) -> None:
        uow = self._uow
        await uow.sessions.create(queued.session)
        for event in queued.events:
            if event.run_id is None:
                await uow.sessions.append_event(event)
        await uow.runs.create(queued.run)
        await uow.runs.add_checkpoint(queued.checkpoint)
        for event in queued.events:
            if event.run_id is not None:
                await uow.sessions.append_event(event)

    async def decide(self, decision: Decision) -> ScheduleOccurrence:
        # The order of the writes before ADR 2330; the unit of work rolls all back.
        stored = await self._uow.occurrences.insert(decision.occurrence)
        if stored.id != decision.occurrence.id:
            return stored
        if decision.run is not None:
            await self.create_run(decision.run)
        await self.advance(decision.advance, decision.events)
        if decision.outbox is not None:
            await self._uow.outbox.append(decision.outbox)
        return stored

    async def advance(self, command: ScheduleCommand, events: Sequence[ProcessEvent]) -> None:
        await self._uow.schedules.mutate(command)
        for event in events:
            await self._uow.events.append(event)
