"""Run reads and run cancellation for the public edges (``GET /v1/runs/{id}``,
``POST /v1/runs/{id}/cancel``).

Each needs its own exact scope (``run.read``, ``run.cancel``); ``schedule.cancel`` grants
neither. A foreign and a missing run raise the same ``NotFoundError(RUN_NOT_FOUND)``
with the same message and no details, as schedules do (ADR 0601).
"""

from __future__ import annotations

from uuid import UUID

from scheduling.domain.errors import AuthorizationError, NotFoundError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.records import RunRecord
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.cancellation import RunCancellation
from scheduling.service.values import RunView

RUN_READ_SCOPE = "run.read"
RUN_NOT_FOUND = reason(
    "schedule.run.not_found", "The run does not exist or is not visible to the caller"
)
RUN_READ_FORBIDDEN = reason(
    "schedule.run.read_forbidden", "Reading a run requires the exact run.read scope"
)


def run_not_found() -> NotFoundError:
    return NotFoundError(RUN_NOT_FOUND, "run not found")


def view_of(run: RunRecord) -> RunView:
    """The public facts of a run (the same view the occurrence inbox embeds)."""
    return RunView(
        run_id=run.id,
        session_id=run.session_id,
        status=run.status.value,
        scheduled_for=run.scheduled_for,
        deadline_at=run.deadline_at,
        finished_at=run.finished_at,
        failure=run.failure,
    )


class RunService:
    """Principal-scoped run read and cancel."""

    def __init__(self, uow: UnitOfWorkFactory, clock: Clock) -> None:
        self._uow = uow
        self._cancellation = RunCancellation(uow, clock)

    async def get(self, principal: Principal, run_id: UUID) -> RunView:
        if not principal.has(RUN_READ_SCOPE):
            raise AuthorizationError(RUN_READ_FORBIDDEN, "run.read is required")
        try:
            async with self._uow.begin(principal) as uow:
                run = await uow.runs.get(run_id, principal)
        except NotFoundError:
            raise run_not_found() from None
        return view_of(run)

    async def cancel(self, principal: Principal, run_id: UUID) -> RunView:
        try:
            run = await self._cancellation.cancel(principal, run_id)
        except NotFoundError:
            raise run_not_found() from None
        return view_of(run)
