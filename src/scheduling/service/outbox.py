"""Building ``schedule_run_finished`` rows, and the reader that drains the outbox.

The accountant and the materializer pass the revision they already loaded (the
occurrence's pinned revision), so the alert names the schedule as it was at firing
even when it was renamed since. The reader delivers each pending row through the
``OutcomeDelivery`` port and marks it delivered in its own short transaction; a row
is marked only once, so a crash between delivery and mark re-delivers at most that
row (at-least-once, like every outbox).
"""

from __future__ import annotations

from datetime import datetime
from uuid import NAMESPACE_URL, UUID, uuid5

from scheduling.domain.cadence import format_instant
from scheduling.domain.occurrence import ScheduleOccurrence
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.clock import Clock
from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage, OutcomeDelivery
from scheduling.ports.unit_of_work import UnitOfWorkFactory

_NAMESPACE = uuid5(NAMESPACE_URL, "urn:scheduling:schedule-run-finished")


def run_finished_id(occurrence_id: UUID) -> UUID:
    return uuid5(_NAMESPACE, str(occurrence_id))


def run_finished(
    schedule: Schedule, revision: ScheduleRevision, occurrence: ScheduleOccurrence, at: datetime
) -> OutboxMessage:
    """The outcome row of ``occurrence``: its pinned revision's title and nominal instant."""
    return OutboxMessage(
        id=run_finished_id(occurrence.id),
        tenant_id=schedule.tenant_id,
        principal_id=schedule.principal_id,
        schedule_id=schedule.id,
        occurrence_id=occurrence.id,
        kind=RUN_FINISHED,
        payload={
            "title": revision.title,
            "nominal_fire_at": format_instant(occurrence.nominal_fire_at),
        },
        created_at=at,
    )


class OutboxReader:
    """Drains pending outbox rows through a delivery port, idempotently."""

    def __init__(self, *, uow: UnitOfWorkFactory, delivery: OutcomeDelivery, clock: Clock) -> None:
        self._uow = uow
        self._delivery = delivery
        self._clock = clock

    async def drain(self, limit: int = 100) -> int:
        """Deliver and mark at most ``limit`` pending rows; returns how many were marked."""
        async with self._uow.begin() as uow:
            pending = await uow.outbox.pending(limit)
        marked = 0
        for message in pending:
            await self._delivery.deliver(message)
            async with self._uow.begin() as uow:
                if await uow.outbox.mark_delivered(message.id, self._clock.now()):
                    marked += 1
                await uow.commit()
        return marked
