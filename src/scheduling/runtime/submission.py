"""On-demand run submission: a session, its user message, a QUEUED run and its seed
checkpoint in one transaction (the path interactive work takes; the materializer is
the path of scheduled work)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from scheduling.domain.errors import AuthorizationError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import (
    RunCheckpoint,
    RunRecord,
    RunStatus,
    SessionEvent,
    SessionRecord,
)
from scheduling.ports.runtime import RunPriority
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.runtime.usage import Usage

SCOPE_NOT_HELD = reason(
    "schedule.runtime.scope_not_held", "A submitted run requests a scope its principal lacks"
)


@dataclass(frozen=True)
class Submission:
    """What to run: agent version, instruction, the exact scopes, limits and priority."""

    agent_id: UUID
    agent_version: str
    policy_profile: str
    instruction: str
    requested_scopes: frozenset[str]
    limits: RunLimits
    priority: RunPriority = RunPriority.INTERACTIVE
    timeout_seconds: float | None = None


class RunSubmitter:
    """Creates QUEUED runs whose scope snapshot is exactly the requested scopes."""

    def __init__(
        self, uow: UnitOfWorkFactory, clock: Clock, ids: IdGenerator, probe: Probe | None = None
    ) -> None:
        self._uow = uow
        self._clock = clock
        self._ids = ids
        self._probe = probe or NullProbe()

    async def submit(self, principal: Principal, submission: Submission) -> RunRecord:
        missing = submission.requested_scopes - principal.scopes
        if missing:
            raise AuthorizationError(
                SCOPE_NOT_HELD, "requested scopes must be held", {"scopes": sorted(missing)}
            )
        now: datetime = self._clock.now()
        session = SessionRecord(
            id=self._ids.new_uuid(),
            tenant_id=principal.tenant_id,
            principal_id=principal.principal_id,
            agent_id=submission.agent_id,
            agent_version=submission.agent_version,
            metadata={},
            created_at=now,
            updated_at=now,
        )
        deadline = (
            None
            if submission.timeout_seconds is None
            else now + timedelta(seconds=submission.timeout_seconds)
        )
        run = RunRecord(
            id=self._ids.new_uuid(),
            tenant_id=principal.tenant_id,
            principal_id=principal.principal_id,
            session_id=session.id,
            agent_id=submission.agent_id,
            agent_version=submission.agent_version,
            policy_profile=submission.policy_profile,
            status=RunStatus.QUEUED,
            priority=int(submission.priority),
            scheduled_for=now,
            requested_scopes=submission.requested_scopes,
            limits=submission.limits.to_json(),
            created_at=now,
            updated_at=now,
            deadline_at=deadline,
            usage=Usage().to_json(),
        )
        async with self._uow.begin(principal) as uow:
            await uow.sessions.create(session)
            await uow.runs.create(run)
            await uow.sessions.append_event(
                SessionEvent(
                    session_id=session.id,
                    seq=1,
                    event_type="message.user",
                    actor=f"principal:{principal.principal_id}",
                    payload={"text": submission.instruction},
                    occurred_at=now,
                    run_id=run.id,
                )
            )
            await uow.runs.add_checkpoint(RunCheckpoint(run.id, 0, 0, {"cursor": 0}, now))
            await uow.commit()
        await self._probe.step("run.submitted")
        return run
