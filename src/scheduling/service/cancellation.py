"""Run cancellation: its own exact ``run.cancel`` authority, never a schedule's.

Cancelling sets CANCELLED, clears the lease and increments the fencing token in one
fenced write, so a worker still executing the run is fenced out at its next write and
stops without touching the row again. ``schedule.cancel`` grants none of this: a
schedule's cancellation stops future occurrences only (spec "State transitions").
"""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from scheduling.domain.errors import AuthorizationError, ConflictError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import TERMINAL_RUN_STATUSES, RunRecord, RunStatus, SessionEvent
from scheduling.ports.repositories import STALE
from scheduling.ports.unit_of_work import UnitOfWorkFactory

RUN_CANCEL_SCOPE = "run.cancel"
CANCEL_FORBIDDEN = reason(
    "schedule.runtime.cancel_forbidden", "Cancelling a run requires the exact run.cancel scope"
)
CANCEL_TERMINAL = reason(
    "schedule.runtime.cancel_terminal",
    "The run already completed or failed; it cannot be cancelled",
)
_ATTEMPTS = 5


class RunCancellation:
    """Cancel one of the caller's runs (principal-scoped: a foreign run is not found)."""

    def __init__(self, uow: UnitOfWorkFactory, clock: Clock, probe: Probe | None = None) -> None:
        self._uow = uow
        self._clock = clock
        self._probe = probe or NullProbe()

    async def cancel(self, principal: Principal, run_id: UUID) -> RunRecord:
        """Returns the CANCELLED run; idempotent for an already cancelled run. Raises
        ``AuthorizationError(CANCEL_FORBIDDEN)`` without ``run.cancel`` (before reading
        anything), ``NotFoundError`` for a foreign or absent run, ``ConflictError
        (CANCEL_TERMINAL)`` for a COMPLETED or FAILED run."""
        if not principal.has(RUN_CANCEL_SCOPE):
            raise AuthorizationError(CANCEL_FORBIDDEN, "run.cancel is required to cancel a run")
        for _ in range(_ATTEMPTS):
            async with self._uow.begin(principal) as uow:
                run = await uow.runs.get(run_id, principal)
                if run.status is RunStatus.CANCELLED:
                    return run
                if run.status in TERMINAL_RUN_STATUSES:
                    raise ConflictError(
                        CANCEL_TERMINAL, "the run is already terminal", {"status": run.status.value}
                    )
                now = self._clock.now()
                cancelled = replace(
                    run,
                    status=RunStatus.CANCELLED,
                    lease_owner=None,
                    lease_expires_at=None,
                    fencing_token=run.fencing_token + 1,
                    finished_at=now,
                    updated_at=now,
                )
                try:
                    await uow.runs.save(cancelled, expected_fencing_token=run.fencing_token)
                except ConflictError as exc:
                    if exc.code == STALE:
                        continue  # a claim or heartbeat moved the row; read it again
                    raise
                existing = await uow.sessions.events(run.session_id, principal)
                await uow.sessions.append_event(
                    SessionEvent(
                        session_id=run.session_id,
                        seq=(existing[-1].seq if existing else 0) + 1,
                        event_type="run.cancelled",
                        actor=f"principal:{principal.principal_id}",
                        payload={"previous_status": run.status.value},
                        occurred_at=now,
                        run_id=run.id,
                    )
                )
                await uow.commit()
            await self._probe.step("run.cancelled")
            return cancelled
        raise ConflictError(STALE, "the run kept changing; retry", {"run_id": str(run_id)})
