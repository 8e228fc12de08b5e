"""The materializer's hot-path store (spec "Materialization transaction"; ADR 1700).

Every method runs inside the caller's schedule unit of work, so the lock, the
authority, agent and overlap reads and the writes share one transaction. A store for a
real database answers each method with one statement (one round trip): the lock with
the current revision, one snapshot of authority, agent version and the latest
materialized occurrence's run under that lock, and the decision's writes (the
occurrence; the dedicated session with its three creation events, run and seed
checkpoint; the schedule's advance with its audit events; or the outcome row) as one
write, applied only if the occurrence is new (ADR 2330). A schedule advance alone (an
instant already decided, a repaired cache) is one write too.
``scheduling.service.firing.PortMaterializationStore`` composes the same from the
ordinary ports and directories (in-memory tests, static directories).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol
from uuid import UUID

from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.firing import Decision, FiringContext, QueuedRun
from scheduling.ports.records import ProcessEvent
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork

__all__ = ["Decision", "FiringContext", "MaterializationStore", "QueuedRun"]


class MaterializationStore(Protocol):
    async def lock_due(
        self, uow: UnitOfWork, schedule_id: UUID, now: datetime
    ) -> tuple[Schedule, ScheduleRevision] | None:
        """Lock the schedule (``FOR UPDATE SKIP LOCKED``) if ACTIVE and due at ``now``;
        return it with its current revision, or ``None`` (not due, or locked)."""
        ...

    async def context(
        self, uow: UnitOfWork, schedule: Schedule, revision: ScheduleRevision
    ) -> FiringContext:
        """Current authority, pinned agent version and overlap state, one snapshot."""
        ...

    async def decide(self, uow: UnitOfWork, decision: Decision) -> ScheduleOccurrence:
        """Insert the decision's occurrence unless its instant already has one; only if
        it was inserted, write the run (or the outcome row), the schedule's advance and
        the audit events, all in one statement on PostgreSQL (ADR 2330). Returns the
        stored occurrence: ``decision.occurrence``, or the committed one of the same
        instant (then nothing was written). A stale advance raises ``ConflictError``
        after the writes, so the caller's transaction must not commit."""
        ...

    async def advance(
        self, uow: UnitOfWork, command: ScheduleCommand, events: Sequence[ProcessEvent]
    ) -> None:
        """Apply the schedule's trusted compare-and-swap ``command`` and append the
        decision's process events, atomically within the transaction (one statement on
        PostgreSQL, ADR 1750); a stale ``expected`` raises ``ConflictError``."""
        ...
