"""ScheduleMaterializer: one short transaction turns a due schedule into exactly one
decided occurrence (spec "Materialization transaction").

Step for step, in one trusted unit of work, with ``now`` read once from the Clock:

1. lock the schedule ``FOR UPDATE SKIP LOCKED`` if ACTIVE and ``next_fire_at <= now``;
2. load its current immutable revision and compute the due calculation (bounded);
3. resolve current authority (principal exists and is enabled, every requested scope
   still granted, the authority version the revision pinned unchanged), configuration
   (pinned agent version exists with the pinned policy profile, tenant ceilings
   configured and not exceeded), grace, overlap, and finally admission (only when a
   run would be created);
4. write the decision at once (ADR 2330): insert the unique occurrence (the idempotency
   key is (schedule_id, nominal_fire_at)) and, only if it is new,
   a. for MATERIALIZED: the dedicated session with its reserved metadata,
      ``session.created``, the context-only scheduler seed user message, the priority-10
      QUEUED run (``scheduled_for = now``, exactly the requested scopes, the pinned
      limits, ``deadline_at = now + run_timeout_seconds``), its seed checkpoint and
      ``run.queued``; otherwise the outcome outbox row;
   b. advance ``next_fire_at`` to the first future instant, count a failure
      disposition, apply the one-time completion or the failure-limit pause, and append
      the schedule events (one ``schedule.misfires_coalesced`` with only
      first/last/count);
   an instant already decided by a committed transaction writes nothing of this and
   only advances the cadence (ALREADY_DECIDED);
5. commit; the runs table's insert trigger has queued the run's notification, which
   PostgreSQL delivers at commit (ADR 1750).

Each statement that writes (and the lock) is followed by
``await probe.step("materialize.<step>")`` (a no-op in production) so the simulator can
interleave workers and crash after every write. The reads and writes go through a
``MaterializationStore`` (ADR 1700, 1750, 2250, 2330): on PostgreSQL the lock with the
revision and the tenant's admission lock; authority, agent, overlap and the tenant's
usage in one snapshot under both locks; the whole decision in one statement, so a
MATERIALIZED decision is 4 statements and 5 round trips in one transaction (BEGIN with
its settings and COMMIT included). No model, tool, network or identity-provider I/O
happens inside the transaction; every read is local authoritative state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any
from uuid import UUID

from scheduling.domain.cadence import format_instant
from scheduling.domain.events import (
    ScheduleEvent,
    ScheduleEventType,
    misfires_coalesced,
    next_fire_repaired,
    occurrence_event,
    state_event,
)
from scheduling.domain.lifecycle import Action, apply, decide
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.due import DueCalculation, RecurrenceCalculator
from scheduling.domain.revision import ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState
from scheduling.ports.admission import AdmissionOutcome, ScheduleAdmissionController
from scheduling.ports.clock import Clock
from scheduling.ports.directories import (
    AgentRegistry,
    AuthoritySnapshot,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.ids import IdGenerator
from scheduling.ports.materialization import (
    Decision,
    FiringContext,
    MaterializationStore,
    QueuedRun,
)
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import (
    TERMINAL_RUN_STATUSES,
    RunCheckpoint,
    RunRecord,
    RunStatus,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.repositories import ScheduleCommand
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory
from scheduling.service.firing import PortMaterializationStore
from scheduling.service.outbox import run_finished
from scheduling.service.schedules import to_record

SCHEDULER_ACTOR = "scheduler"
SCHEDULED_PRIORITY = 10

PRINCIPAL_MISSING = reason(
    "schedule.materialize.principal_missing",
    "At firing the schedule's principal no longer exists; AUTHORIZATION_FAILED",
)
PRINCIPAL_DISABLED = reason(
    "schedule.materialize.principal_disabled",
    "At firing the schedule's principal is disabled; AUTHORIZATION_FAILED",
)
SCOPE_REVOKED = reason(
    "schedule.materialize.scope_revoked",
    "At firing a requested scope is no longer granted; AUTHORIZATION_FAILED",
)
AUTHORITY_CHANGED = reason(
    "schedule.materialize.authority_changed",
    "At firing the principal's authority version differs from the revision's pinned one;"
    " AUTHORIZATION_FAILED",
)
AGENT_VERSION_MISSING = reason(
    "schedule.materialize.agent_version_missing",
    "At firing the pinned agent version does not exist; CONFIGURATION_FAILED",
)
POLICY_MISMATCH = reason(
    "schedule.materialize.policy_mismatch",
    "At firing the pinned policy profile differs from the agent version's; CONFIGURATION_FAILED",
)
TENANT_UNCONFIGURED = reason(
    "schedule.materialize.tenant_unconfigured",
    "At firing the tenant has no scheduling ceilings; CONFIGURATION_FAILED",
)
CEILING_EXCEEDED = reason(
    "schedule.materialize.ceiling_exceeded",
    "At firing a pinned bound is above the tenant's current ceiling; CONFIGURATION_FAILED",
)
GRACE_EXPIRED = reason(
    "schedule.materialize.grace_expired",
    "The latest due instant is outside the misfire grace window; MISSED, no run",
)
OVERLAP = reason(
    "schedule.materialize.overlap",
    "The previous materialized occurrence's run is not terminal; SKIPPED_OVERLAP, no run",
)

# Every probe step of the transaction, in order (the simulator's declared steps).
STEP_LOCKED = "materialize.locked"
STEP_ADMISSION = "materialize.admission_locked"
STEP_DECIDED = "materialize.decision_written"
"""After the one statement that writes the decision (ADR 2330): the occurrence and,
only if it was new, the run (or the outcome row), the advance and its audit events.
Before it, three statements with a step each (``occurrence_inserted``,
``run_queued``, ``schedule_advanced``)."""
STEP_ADVANCED = "materialize.schedule_advanced"
"""After an advance without a new occurrence: the instant was already decided, or the
cached ``next_fire_at`` was repaired."""
STEP_COMMITTED = "materialize.committed"

WRITE_STEPS = (STEP_DECIDED,)
"""The writes of a decision's transaction (each followed by its probe step)."""

FAILURE_DISPOSITIONS = frozenset(
    {
        OccurrenceDisposition.MISSED,
        OccurrenceDisposition.AUTHORIZATION_FAILED,
        OccurrenceDisposition.CONFIGURATION_FAILED,
    }
)


class MaterializeStatus(StrEnum):
    DECIDED = "decided"
    """An occurrence was committed (any disposition)."""
    NOT_DUE = "not_due"
    """Not ACTIVE, not yet due, or locked by another worker: nothing written."""
    RETRY = "retry"
    """Admission asked for a retry: nothing written, the schedule stays due."""
    ALREADY_DECIDED = "already_decided"
    """The instant already had a committed occurrence; only the cadence advanced."""
    REPAIRED = "repaired"
    """The cached next_fire_at named no due instant; it was repaired (audited)."""


@dataclass(frozen=True)
class MaterializeResult:
    schedule_id: UUID
    status: MaterializeStatus
    occurrence: ScheduleOccurrence | None = None
    """The decided (or already committed) occurrence; for NOT_DUE the latest one."""
    next_fire_at: datetime | None = None
    coalesced: int = 0
    retry_after_seconds: float | None = None
    coalesced_first: datetime | None = None
    """The oldest coalesced instant (the start of the outage this scan closed)."""
    state_after: ScheduleState | None = None
    """The schedule's state after a decision (PAUSED: the failure limit was reached)."""

    @property
    def lag_seconds(self) -> float | None:
        """Due-to-decided lag of a decision made by this call."""
        occ = self.occurrence
        if self.status is not MaterializeStatus.DECIDED or occ is None:
            return None
        return (occ.created_at - occ.nominal_fire_at).total_seconds()

    @property
    def run_id(self) -> UUID | None:
        return None if self.occurrence is None else self.occurrence.run_id

    @property
    def session_id(self) -> UUID | None:
        return None if self.occurrence is None else self.occurrence.session_id


@dataclass(frozen=True)
class _Verdict:
    disposition: OccurrenceDisposition
    reason_code: str | None
    authority: AuthoritySnapshot | None


class ScheduleMaterializer:
    """Materializes one due schedule per call, in its own transaction."""

    def __init__(
        self,
        *,
        uow: UnitOfWorkFactory,
        clock: Clock,
        ids: IdGenerator,
        principals: SchedulePrincipalDirectory,
        agents: AgentRegistry,
        tenants: TenantConfiguration,
        admission: ScheduleAdmissionController,
        probe: Probe | None = None,
        calculator: RecurrenceCalculator | None = None,
        store: MaterializationStore | None = None,
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._ids = ids
        self._principals = principals
        self._agents = agents
        self._tenants = tenants
        self._admission = admission
        self._probe: Probe = probe or NullProbe()
        self._calculator = calculator or RecurrenceCalculator()
        self._store: MaterializationStore = store or PortMaterializationStore(principals, agents)

    async def materialize(self, schedule_id: UUID) -> MaterializeResult:
        """Decide the schedule's due instant, if it is due now (see module docstring)."""
        now = self._clock.now()
        async with self._uow.begin() as uow:
            locked = await self._store.lock_due(uow, schedule_id, now)
            if locked is None:
                latest = await uow.occurrences.latest(schedule_id)
                return MaterializeResult(schedule_id, MaterializeStatus.NOT_DUE, latest)
            schedule, revision = locked
            await self._probe.step(STEP_LOCKED)
            due = self._calculator.due(revision, now, next_fire_at=schedule.next_fire_at)
            if due.candidate is None:
                return await self._repair(uow, schedule, revision, due, now)
            verdict = await self._verdict(uow, schedule, revision, due)
            if isinstance(verdict, float):
                return MaterializeResult(
                    schedule_id,
                    MaterializeStatus.RETRY,
                    next_fire_at=schedule.next_fire_at,
                    retry_after_seconds=verdict,
                )
            result = await self._decide(uow, schedule, revision, due, verdict, now)
            await uow.commit()
        await self._probe.step(STEP_COMMITTED)
        return result

    # ------------------------------------------------------------------ decisions

    async def _verdict(
        self, uow: UnitOfWork, schedule: Schedule, revision: ScheduleRevision, due: DueCalculation
    ) -> _Verdict | float:
        """The disposition, or a RETRY backoff (float)."""
        context = await self._store.context(uow, schedule, revision)
        authority = context.authority
        failed = self._authorization(authority, revision)
        if failed is not None:
            return _Verdict(OccurrenceDisposition.AUTHORIZATION_FAILED, failed, authority)
        misconfigured = await self._configuration(schedule, revision, context)
        if misconfigured is not None:
            return _Verdict(OccurrenceDisposition.CONFIGURATION_FAILED, misconfigured, authority)
        if due.missed:
            return _Verdict(OccurrenceDisposition.MISSED, GRACE_EXPIRED, authority)
        if self._in_flight(context):
            return _Verdict(OccurrenceDisposition.SKIPPED_OVERLAP, OVERLAP, authority)
        decision = await self._admission.check(uow, schedule.tenant_id, revision, due.now)
        if decision.outcome is AdmissionOutcome.RETRY:
            return float(decision.retry_after_seconds or 1.0)
        if decision.outcome is AdmissionOutcome.REJECT:
            return _Verdict(OccurrenceDisposition.MISSED, decision.reason_code, authority)
        return _Verdict(OccurrenceDisposition.MATERIALIZED, None, authority)

    @staticmethod
    def _authorization(
        authority: AuthoritySnapshot | None, revision: ScheduleRevision
    ) -> str | None:
        if authority is None:
            return PRINCIPAL_MISSING
        if not authority.enabled:
            return PRINCIPAL_DISABLED
        if not revision.requested_scopes <= authority.scopes:
            return SCOPE_REVOKED
        # Any change of the owner's authority since they approved this revision, even
        # an added role, stops it until authority returns or the owner re-approves
        # (ADR 1200). Unpinned (older) revisions keep the scope-only rule.
        pinned = revision.authority_version
        if pinned is not None and pinned != authority.authority_version:
            return AUTHORITY_CHANGED
        return None

    async def _configuration(
        self, schedule: Schedule, revision: ScheduleRevision, context: FiringContext
    ) -> str | None:
        agent = context.agent
        if agent is None:
            return AGENT_VERSION_MISSING
        if agent.policy_profile != revision.policy_profile:
            return POLICY_MISMATCH
        ceilings = await self._tenants.ceilings(schedule.tenant_id)
        if ceilings is None:
            return TENANT_UNCONFIGURED
        if ceilings.exceeded_by(
            revision.limits, revision.run_timeout_seconds, revision.misfire_grace_seconds
        ):
            return CEILING_EXCEEDED
        return None

    @staticmethod
    def _in_flight(context: FiringContext) -> bool:
        """The most recent MATERIALIZED occurrence links to a non-terminal run."""
        status = context.previous_run_status
        return status is not None and status not in TERMINAL_RUN_STATUSES

    # ------------------------------------------------------------------ writes

    async def _decide(
        self,
        uow: UnitOfWork,
        schedule: Schedule,
        revision: ScheduleRevision,
        due: DueCalculation,
        verdict: _Verdict,
        now: datetime,
    ) -> MaterializeResult:
        assert due.candidate is not None
        materialized = verdict.disposition is OccurrenceDisposition.MATERIALIZED
        session_id = self._ids.new_uuid() if materialized else None
        run_id = self._ids.new_uuid() if materialized else None
        authority = verdict.authority
        occurrence = ScheduleOccurrence(
            id=self._ids.new_uuid(),
            schedule_id=schedule.id,
            schedule_revision=revision.revision,
            nominal_fire_at=due.candidate,
            disposition=verdict.disposition,
            session_id=session_id,
            run_id=run_id,
            reason_code=verdict.reason_code,
            authority_version=None if authority is None else authority.authority_version,
            materialized_at=now if materialized else None,
            links_erased_at=None,
            created_at=now,
        )
        run = None
        if materialized:
            assert authority is not None
            run = self._queued_run(schedule, revision, occurrence, authority, now)
        updated = self._advanced(schedule, revision, due, verdict.disposition, now)
        events = self._audit_events(schedule, revision, due, verdict, occurrence, updated, now)
        # No run will finish: the skipped/missed outcome row commits with the decision.
        outbox = None if materialized else run_finished(schedule, revision, occurrence, now)
        command = ScheduleCommand(expected=schedule, updated=updated)
        records = [to_record(event) for event in events]
        stored = await self._write(uow, Decision(occurrence, run, command, records, outbox))
        if stored.id != occurrence.id:
            # The instant was decided by a committed transaction: nothing was written
            # but the cadence advances, with no failure counted and no event.
            updated = self._advanced(schedule, revision, due, None, now)
            await self._advance(uow, schedule, updated, [])
            return MaterializeResult(
                schedule.id, MaterializeStatus.ALREADY_DECIDED, stored, updated.next_fire_at
            )
        return MaterializeResult(
            schedule.id,
            MaterializeStatus.DECIDED,
            occurrence,
            updated.next_fire_at,
            coalesced=due.coalesced_count,
            coalesced_first=due.coalesced_first,
            state_after=updated.state,
        )

    def _audit_events(
        self,
        schedule: Schedule,
        revision: ScheduleRevision,
        due: DueCalculation,
        verdict: _Verdict,
        occurrence: ScheduleOccurrence,
        updated: Schedule,
        now: datetime,
    ) -> list[ScheduleEvent]:
        """The decision's audit events: the occurrence, at most one coalescing summary,
        and the state transition the advance causes."""
        assert due.candidate is not None
        events = [
            occurrence_event(
                self._ids.new_uuid(),
                schedule,
                occurrence_id=occurrence.id,
                revision=revision.revision,
                disposition=verdict.disposition.value,
                nominal_fire_at=due.candidate,
                actor=SCHEDULER_ACTOR,
                at=now,
                session_id=occurrence.session_id,
                run_id=occurrence.run_id,
                reason_code=verdict.reason_code,
            )
        ]
        if due.coalesced_count and due.coalesced_first and due.coalesced_last:
            events.append(
                misfires_coalesced(
                    self._ids.new_uuid(),
                    schedule,
                    revision=revision.revision,
                    first_nominal_at=due.coalesced_first,
                    last_nominal_at=due.coalesced_last,
                    count=due.coalesced_count,
                    actor=SCHEDULER_ACTOR,
                    at=now,
                )
            )
        return events + self._transition_events(schedule, updated, now)

    async def _write(self, uow: UnitOfWork, decision: Decision) -> ScheduleOccurrence:
        """Every write of the decision at once (ADR 2330): one statement on PostgreSQL,
        followed by the one probe step of a decision."""
        stored = await self._store.decide(uow, decision)
        await self._probe.step(STEP_DECIDED)
        return stored

    @staticmethod
    def _queued_run(
        schedule: Schedule,
        revision: ScheduleRevision,
        occurrence: ScheduleOccurrence,
        authority: AuthoritySnapshot,
        now: datetime,
    ) -> QueuedRun:
        """The dedicated session, its three creation events, the QUEUED run and its
        seed checkpoint."""
        assert occurrence.session_id is not None
        assert occurrence.run_id is not None
        session_id, run_id = occurrence.session_id, occurrence.run_id
        link = {
            "schedule_id": str(schedule.id),
            "schedule_revision": revision.revision,
            "occurrence_id": str(occurrence.id),
            "nominal_fire_at": format_instant(occurrence.nominal_fire_at),
        }
        metadata: dict[str, Any] = dict(link)
        if revision.browser_profile_id is not None:
            metadata["browser_profile_id"] = str(revision.browser_profile_id)
        deadline = now + timedelta(seconds=revision.run_timeout_seconds)
        session = SessionRecord(
            id=session_id,
            tenant_id=schedule.tenant_id,
            principal_id=schedule.principal_id,
            agent_id=revision.agent_id,
            agent_version=revision.agent_version,
            metadata=metadata,
            created_at=now,
            updated_at=now,
            title=revision.title,
        )
        events = (
            SessionEvent(
                session_id=session_id,
                seq=1,
                event_type="session.created",
                actor=SCHEDULER_ACTOR,
                payload={"session_id": str(session_id), **link},
                occurred_at=now,
            ),
            # The instruction is durable model context, not a chat message (context_only).
            SessionEvent(
                session_id=session_id,
                seq=2,
                event_type="message.user",
                actor=SCHEDULER_ACTOR,
                payload={"role": "user", "content": revision.instruction},
                occurred_at=now,
                context_only=True,
            ),
            SessionEvent(
                session_id=session_id,
                seq=3,
                event_type="run.queued",
                actor=SCHEDULER_ACTOR,
                payload={
                    "run_id": str(run_id),
                    **link,
                    "authority_version": authority.authority_version,
                    "priority": SCHEDULED_PRIORITY,
                    "scheduled_for": format_instant(now),
                    "deadline_at": format_instant(deadline),
                },
                occurred_at=now,
                run_id=run_id,
            ),
        )
        run = RunRecord(
            id=run_id,
            tenant_id=schedule.tenant_id,
            principal_id=schedule.principal_id,
            session_id=session_id,
            agent_id=revision.agent_id,
            agent_version=revision.agent_version,
            policy_profile=revision.policy_profile,
            status=RunStatus.QUEUED,
            priority=SCHEDULED_PRIORITY,
            scheduled_for=now,
            requested_scopes=frozenset(revision.requested_scopes),
            limits=revision.limits.to_json(),
            created_at=now,
            updated_at=now,
            deadline_at=deadline,
            cost=Decimal(0),
            metadata={
                **link,
                "authority_version": authority.authority_version,
                "run_timeout_seconds": revision.run_timeout_seconds,
            },
        )
        checkpoint = RunCheckpoint(
            run_id=run_id,
            seq=0,
            fencing_token=0,
            state={"kind": "seed", "session_id": str(session_id), "context_seq": 2},
            created_at=now,
        )
        return QueuedRun(session, events, run, checkpoint)

    async def _advance(
        self, uow: UnitOfWork, schedule: Schedule, updated: Schedule, events: list[ScheduleEvent]
    ) -> None:
        """Store ``updated`` over ``schedule`` and append ``events``, in one write."""
        command = ScheduleCommand(expected=schedule, updated=updated)
        await self._store.advance(uow, command, [to_record(event) for event in events])
        await self._probe.step(STEP_ADVANCED)

    def _advanced(
        self,
        schedule: Schedule,
        revision: ScheduleRevision,
        due: DueCalculation,
        disposition: OccurrenceDisposition | None,
        now: datetime,
    ) -> Schedule:
        """The first future instant; a failure counted; completed or auto-paused."""
        failures = schedule.consecutive_failures
        if disposition in FAILURE_DISPOSITIONS:
            failures += 1
        updated = schedule.model_copy(
            update={
                "next_fire_at": due.next_future,
                "consecutive_failures": failures,
                "updated_at": max(now, schedule.updated_at),
            }
        )
        if due.next_future is None:
            updated = apply(
                updated, decide(Action.COMPLETE, updated.state, 0, None), now=now, next_fire_at=None
            )
        elif failures >= revision.max_consecutive_failures and disposition is not None:
            updated = apply(
                updated,
                decide(Action.AUTO_PAUSE, updated.state, 0, None),
                now=now,
                next_fire_at=None,
            )
        # ``model_copy(update=)`` and ``apply`` already re-validated it (ADR 2330).
        return updated

    def _transition_events(
        self, before: Schedule, after: Schedule, now: datetime
    ) -> list[ScheduleEvent]:
        if after.state is before.state:
            return []
        kind = (
            ScheduleEventType.COMPLETED
            if after.state is ScheduleState.COMPLETED
            else ScheduleEventType.AUTO_PAUSED
        )
        return [
            state_event(
                self._ids.new_uuid(),
                kind,
                before=before,
                after=after,
                actor=SCHEDULER_ACTOR,
                at=now,
            )
        ]

    async def _repair(
        self,
        uow: UnitOfWork,
        schedule: Schedule,
        revision: ScheduleRevision,
        due: DueCalculation,
        now: datetime,
    ) -> MaterializeResult:
        """``next_fire_at <= now`` but no instant is due: repair the cache, audited."""
        updated = self._advanced(schedule, revision, due, None, now)
        event = next_fire_repaired(
            self._ids.new_uuid(),
            schedule,
            previous=schedule.next_fire_at,
            repaired=updated.next_fire_at,
            actor=SCHEDULER_ACTOR,
            at=now,
        )
        await self._advance(uow, schedule, updated, [event])
        await uow.commit()
        await self._probe.step(STEP_COMMITTED)
        return MaterializeResult(
            schedule.id, MaterializeStatus.REPAIRED, None, updated.next_fire_at
        )
