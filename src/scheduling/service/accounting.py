"""Post-run accounting (spec "State transitions"): one idempotent hook per occurrence.

When the run linked to a MATERIALIZED occurrence is terminal:

* COMPLETED resets ``consecutive_failures`` to zero;
* FAILED increments it; a user-cancelled run (CANCELLED) leaves it unchanged;
* reaching the current revision's ``max_consecutive_failures`` pauses an ACTIVE
  schedule with ``failure_limit`` and emits ``schedule.auto_paused``;
* ``schedule.run_accounted`` records the terminal run status, the resulting count and
  the sanitized failure classification (reason, error class and any provider,
  provider_code, http_status, provider_parameter) - never the failure message.

Misses, authorization and configuration failures have no run: the materializer counts
them in the transaction that records them, and overlap skips count nothing.

Sharing the sweep (ADR 2221): ``account_pending`` accounts a batch ``PendingAccounts``
claimed for it (each run held by this sweep until the batch ends, so a second
scheduler's sweep takes the next runs instead of the same oldest ones), each run in a
transaction of its own, retried like a materialization (``TransientRetry``: the
accounting is idempotent on re-execution), its failures logged under
``scheduling.accounting``.

Idempotency: the ``schedule.run_accounted`` event id is derived from the occurrence
id, the schedule row is locked first, and the event is appended with
``append_once`` (``INSERT ... ON CONFLICT DO NOTHING``) before the schedule is
written: a second accounting of one occurrence, concurrent or later, appends nothing,
changes nothing and returns ``already_accounted`` - without provoking a unique
violation, which PostgreSQL would log as an ERROR line (docs/decisions/1901).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import NAMESPACE_URL, UUID, uuid5

from scheduling.domain.cadence import format_instant
from scheduling.domain.events import RUN_ACCOUNTED, ScheduleEventType, state_event
from scheduling.domain.lifecycle import Action, apply, decide
from scheduling.domain.schedule import TERMINAL_STATES, Schedule, ScheduleState
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.records import TERMINAL_RUN_STATUSES, ProcessEvent, RunRecord, RunStatus
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.retry import TransientRetry, fault_of, is_transient
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.outbox import run_finished
from scheduling.service.schedules import to_record

ACCOUNTANT_ACTOR = "scheduler"
SANITIZED_FAILURE_FIELDS = (
    "reason",
    "error_class",
    "provider",
    "provider_code",
    "http_status",
    "provider_parameter",
)
_NAMESPACE = uuid5(NAMESPACE_URL, "urn:scheduling:run-accounted")
_log = logging.getLogger("scheduling.accounting")


def accounted_event_id(occurrence_id: UUID) -> UUID:
    """The one id the accounting event of ``occurrence_id`` can have."""
    return uuid5(_NAMESPACE, str(occurrence_id))


def sanitized_failure(run: RunRecord) -> dict[str, Any] | None:
    """The failure classification a schedule event may carry (no message, no details)."""
    if run.status is not RunStatus.FAILED:
        return None
    failure = run.failure or {}
    return {k: failure[k] for k in SANITIZED_FAILURE_FIELDS if failure.get(k) is not None}


def next_failure_count(current: int, status: RunStatus) -> int:
    """The spec's rule for a terminal run status."""
    if status is RunStatus.COMPLETED:
        return 0
    if status is RunStatus.FAILED:
        return current + 1
    return current


@dataclass(frozen=True)
class AccountResult:
    run_id: UUID
    occurrence_id: UUID
    run_status: RunStatus
    consecutive_failures: int
    """The count after accounting (-1 when it was accounted before)."""
    auto_paused: bool
    already_accounted: bool = False


class PendingAccounts(Protocol):
    """Finds terminal scheduled runs whose occurrence was not yet accounted."""

    async def pending(self, limit: int) -> list[UUID]:
        """At most ``limit`` run ids, oldest first (deterministic order)."""
        ...

    def claimed(self, limit: int) -> AbstractAsyncContextManager[list[UUID]]:
        """At most ``limit`` pending run ids no concurrent claim holds, oldest first,
        held by this claim until the block ends."""
        ...


class RunAccountant:
    """Applies post-run accounting; safe to call any number of times per run."""

    def __init__(self, *, uow: UnitOfWorkFactory, clock: Clock, ids: IdGenerator) -> None:
        self._uow = uow
        self._clock = clock
        self._ids = ids

    async def account_run(self, run_id: UUID) -> AccountResult | None:
        """Account the occurrence linked to ``run_id`` if the run is terminal; ``None``
        when the run is not a scheduled one (or its links were erased) or not terminal."""
        now = self._clock.now()
        async with self._uow.begin() as uow:
            occurrence = await uow.occurrences.for_run(run_id)
            if occurrence is None:
                return None
            run = await uow.runs.get(run_id, None)
            if run.status not in TERMINAL_RUN_STATUSES:
                return None
            schedule = await uow.schedules.get(occurrence.schedule_id, None, for_update=True)
            revision = await uow.schedules.get_revision(
                schedule.id, schedule.current_revision, None
            )
            failures = next_failure_count(schedule.consecutive_failures, run.status)
            appended = await uow.events.append_once(
                self._accounted(schedule, occurrence.id, run, failures, now)
            )
            if not appended:
                # Accounted before (or by a concurrent accountant that committed while
                # we waited for the lock): nothing more to do; roll back the read.
                return AccountResult(run_id, occurrence.id, run.status, -1, False, True)
            # A terminal schedule keeps the ``updated_at`` of its transition: the purge
            # counts retention from that "terminal updated_at", not from a late run.
            touched = schedule.updated_at
            if schedule.state not in TERMINAL_STATES:
                touched = max(now, touched)
            updated = schedule.model_copy(
                update={"consecutive_failures": failures, "updated_at": touched}
            )
            pause = (
                schedule.state is ScheduleState.ACTIVE
                and failures >= revision.max_consecutive_failures
            )
            if pause:
                decision = decide(Action.AUTO_PAUSE, schedule.state, 0, None)
                updated = apply(updated, decision, now=now, next_fire_at=None)
            updated = Schedule.model_validate(updated.model_dump())
            if updated != schedule:
                await uow.schedules.mutate(ScheduleCommand(expected=schedule, updated=updated))
            # The outcome row, in this transaction, names the pinned revision.
            pinned = revision
            if occurrence.schedule_revision != revision.revision:
                pinned = await uow.schedules.get_revision(
                    schedule.id, occurrence.schedule_revision, None
                )
            await uow.outbox.append(run_finished(schedule, pinned, occurrence, now))
            if pause:
                event = state_event(
                    self._ids.new_uuid(),
                    ScheduleEventType.AUTO_PAUSED,
                    before=schedule,
                    after=updated,
                    actor=ACCOUNTANT_ACTOR,
                    at=now,
                )
                await uow.events.append(to_record(event))
            await uow.commit()
        return AccountResult(run_id, occurrence.id, run.status, failures, pause)

    async def account_pending(
        self, pending: PendingAccounts, limit: int = 50, *, retry: TransientRetry | None = None
    ) -> int:
        """Account every run of one claimed batch; returns how many were new. With a
        ``retry``, each run's transient database errors are retried (accounting is
        idempotent); once one is left over, the database is away: it is logged, the
        batch ends there and the next sweep takes the rest."""
        done = 0
        async with pending.claimed(limit) as batch:
            for run_id in batch:
                try:
                    if retry is None:
                        result = await self.account_run(run_id)
                    else:
                        result = await retry.run(
                            functools.partial(self.account_run, run_id),
                            what=f"accounting run {run_id}",
                            idempotent=True,
                        )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if not is_transient(exc):
                        raise
                    # The database stays away: the rest of the batch would fail too.
                    _log.warning(
                        "accounting run %s: database unavailable (%s); the next sweep retries it",
                        run_id,
                        fault_of(exc),
                        extra={"fault": fault_of(exc)},
                    )
                    break
                done += result is not None and not result.already_accounted
        return done

    def _accounted(
        self,
        schedule: Schedule,
        occurrence_id: UUID,
        run: RunRecord,
        failures: int,
        now: datetime,
    ) -> ProcessEvent:
        payload = {
            "schedule_id": str(schedule.id),
            "revision": schedule.current_revision,
            "tenant_id": schedule.tenant_id,
            "principal_id": schedule.principal_id,
            "actor": ACCOUNTANT_ACTOR,
            "occurred_at": format_instant(now),
            "occurrence_id": str(occurrence_id),
            "run_id": str(run.id),
            "run_status": run.status.value,
            "consecutive_failures": failures,
            "failure": sanitized_failure(run),
        }
        return ProcessEvent(
            id=accounted_event_id(occurrence_id),
            tenant_id=schedule.tenant_id,
            principal_id=schedule.principal_id,
            event_type=RUN_ACCOUNTED,
            actor=ACCOUNTANT_ACTOR,
            payload=payload,
            occurred_at=now,
            schedule_id=schedule.id,
        )
