"""The unit of work's materialization repository (spec "Materialization transaction";
ADR 1700, 1750, 2330): the materializer's steps inside the unit of work's own
transaction. On PostgreSQL each is one statement (the decision's writes one together);
in memory each composes the ordinary repositories over the working tables. The
authority and the agent version are read from the same store the durable directories
read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from uuid import UUID

from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.directories import AgentSpec, AuthoritySnapshot
from scheduling.ports.outbox import OutboxMessage
from scheduling.ports.records import (
    ProcessEvent,
    RunCheckpoint,
    RunRecord,
    RunStatus,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.repositories import ScheduleCommand


@dataclass(frozen=True)
class FiringContext:
    """What the verdict needs beyond the schedule and its revision, read at once."""

    authority: AuthoritySnapshot | None
    """The principal's current authority (``None``: the principal does not exist)."""
    agent: AgentSpec | None
    """The pinned agent version (``None``: it does not exist)."""
    previous_run_status: RunStatus | None
    """The status of the run linked to the latest MATERIALIZED occurrence (``None``: no
    such occurrence, or its links were erased)."""


@dataclass(frozen=True)
class QueuedRun:
    """The dedicated session, its creation events, the run and its seed checkpoint."""

    session: SessionRecord
    events: Sequence[SessionEvent]
    run: RunRecord
    checkpoint: RunCheckpoint


@dataclass(frozen=True)
class Decision:
    """Every write of one decided occurrence (ADR 2330), applied only if the occurrence
    is new: with a run (MATERIALIZED) or with the outcome row (no run will finish)."""

    occurrence: ScheduleOccurrence
    run: QueuedRun | None
    advance: ScheduleCommand
    """The schedule's trusted compare-and-swap (next instant, failures, state)."""
    events: Sequence[ProcessEvent]
    """The decision's audit events."""
    outbox: OutboxMessage | None


class MaterializationRepository(Protocol):
    """See ``scheduling.ports.materialization.MaterializationStore`` (the same steps,
    bound to one unit of work)."""

    async def lock_due(
        self, schedule_id: UUID, now: datetime, *, lock_admission: bool = True
    ) -> tuple[Schedule, ScheduleRevision] | None:
        """With ``lock_admission`` the same statement takes the tenant's admission lock
        after the row lock, and the context read that follows also reads the tenant's
        usage for admission (ADR 2250)."""
        ...

    async def context(
        self, schedule: Schedule, revision: ScheduleRevision, *, lock_admission: bool = True
    ) -> FiringContext:
        """One snapshot of authority, agent version and overlap state; with
        ``lock_admission`` the same read takes the tenant's admission lock (ADR 1750)."""
        ...

    async def create_run(self, queued: QueuedRun) -> None:
        """The run's writes alone (the session, its events, run and checkpoint)."""
        ...

    async def decide(self, decision: Decision) -> ScheduleOccurrence:
        """See ``MaterializationStore.decide``."""
        ...

    async def advance(self, command: ScheduleCommand, events: Sequence[ProcessEvent]) -> None: ...
