"""The record a schedule mutation answers with (the HTTP edge's 200/201 body).

After a successful write the caller has proven authority over the schedule, so the
response shows its control record and the current revision's title and canonical
cadence - never the instruction, which only the ``schedule.read`` point read returns.
The read runs principal-scoped (row-level security applies).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.domain.errors import NotFoundError
from scheduling.domain.identity import Principal
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.schedules import not_found


@dataclass(frozen=True)
class WrittenSchedule:
    schedule: Schedule
    revision: ScheduleRevision
    replayed: bool


class ScheduleViews:
    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def after_write(
        self, principal: Principal, schedule: Schedule, *, replayed: bool
    ) -> WrittenSchedule:
        """``schedule`` as the command returned it, with the revision it names."""
        try:
            async with self._uow.begin(principal) as uow:
                revision = await uow.schedules.get_revision(
                    schedule.id, schedule.current_revision, principal
                )
        except NotFoundError:
            raise not_found() from None
        return WrittenSchedule(schedule, revision, replayed)
