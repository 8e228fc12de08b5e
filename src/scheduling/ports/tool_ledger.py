"""The durable records of the governed tool pipeline, and the conversation bindings it reads.

One invocation row per governed tool call (keyed by the caller's idempotency key, so a
retry after a crash finds it), one approval request per approval-gated invocation and
at most one decision per request. Rows hold hashes, states, reason codes and the
tool's bounded JSON output, never the arguments themselves: arguments may carry an
instruction or credential-shaped text that the application service has not yet
scanned, and state must never hold either.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID

from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason

APPROVAL_DECIDED = reason(
    "schedule.tool.approval_decided", "The approval request already has its one decision"
)


class InvocationState(StrEnum):
    """Where a governed invocation is. SUCCEEDED, FAILED and DENIED are final."""

    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


FINAL_STATES = frozenset(
    {InvocationState.SUCCEEDED, InvocationState.FAILED, InvocationState.DENIED}
)


@dataclass(frozen=True)
class ToolInvocationRecord:
    """One governed tool call. ``idempotency_key`` is None for read-only tools (a read
    has no effect to deduplicate); ``arguments_hash`` covers tool, version and the
    canonical arguments."""

    id: UUID
    tenant_id: str
    principal_id: str
    idempotency_key: str | None
    tool_name: str
    tool_version: str
    arguments_hash: str
    state: InvocationState
    created_at: datetime
    updated_at: datetime
    run_id: UUID | None = None
    session_id: UUID | None = None
    reason_code: str | None = None
    output: dict[str, Any] | None = None
    output_bytes: int | None = None


@dataclass(frozen=True)
class ApprovalRequestRecord:
    """The approval an invocation waits for; ``view_hash`` identifies what was shown."""

    id: UUID
    invocation_id: UUID
    tenant_id: str
    principal_id: str
    view_hash: str
    requested_at: datetime


@dataclass(frozen=True)
class ApprovalDecisionRecord:
    """The one decision on an approval request."""

    approval_id: UUID
    tenant_id: str
    principal_id: str
    approved: bool
    decided_by: str
    decided_at: datetime


class ToolLedger(Protocol):
    """Durable invocation, approval-request and decision records, principal-scoped.

    Contract: every method is one transaction. ``open`` inserts the invocation (and its
    approval request, when given) atomically and returns the stored invocation: when a
    row with the same (tenant, principal, key) exists it returns that row and writes
    nothing. ``decide`` writes the decision and moves the invocation to ``state``
    together; a second decision on one request is refused. ``finish`` moves an
    invocation to a final state with its reason code and output. Another principal's
    rows are invisible (``None``).
    """

    async def find(self, principal: Principal, key: str) -> ToolInvocationRecord | None: ...

    async def get(
        self, principal: Principal, invocation_id: UUID
    ) -> ToolInvocationRecord | None: ...

    async def open(
        self,
        principal: Principal,
        invocation: ToolInvocationRecord,
        approval: ApprovalRequestRecord | None,
    ) -> ToolInvocationRecord: ...

    async def approval(
        self, principal: Principal, invocation_id: UUID
    ) -> tuple[ApprovalRequestRecord | None, ApprovalDecisionRecord | None]: ...

    async def decide(
        self, principal: Principal, decision: ApprovalDecisionRecord, state: InvocationState
    ) -> None: ...

    async def finish(
        self,
        principal: Principal,
        invocation_id: UUID,
        *,
        state: InvocationState,
        at: datetime,
        reason_code: str | None = None,
        output: dict[str, Any] | None = None,
        output_bytes: int | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class WebsiteBinding:
    """A chat's trusted website binding: the browser profile it selected and its origins
    (identity only: no cookie or profile material)."""

    browser_profile_id: UUID
    origins: tuple[str, ...] = ()


class WebsiteBindings(Protocol):
    """The current chat's trusted website binding.

    Contract: ``current`` returns the binding the principal's session selected through a
    trusted surface, or ``None`` (no session, no binding, or another principal's session).
    """

    async def current(
        self, principal: Principal, session_id: UUID | None
    ) -> WebsiteBinding | None: ...
