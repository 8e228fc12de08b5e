"""The in-memory tool ledger (application and property tests only; production refuses it)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any
from uuid import UUID

from scheduling.domain.errors import ConflictError
from scheduling.domain.identity import Principal
from scheduling.ports.tool_ledger import (
    APPROVAL_DECIDED,
    ApprovalDecisionRecord,
    ApprovalRequestRecord,
    InvocationState,
    ToolInvocationRecord,
    WebsiteBinding,
)


def _owned(principal: Principal, row: Any) -> bool:
    return (row.tenant_id, row.principal_id) == (principal.tenant_id, principal.principal_id)


class MemoryToolLedger:
    """See ``scheduling.ports.tool_ledger.ToolLedger``."""

    def __init__(self) -> None:
        self.invocations: dict[UUID, ToolInvocationRecord] = {}
        self.approvals: dict[UUID, ApprovalRequestRecord] = {}
        self.decisions: dict[UUID, ApprovalDecisionRecord] = {}

    async def find(self, principal: Principal, key: str) -> ToolInvocationRecord | None:
        for row in self.invocations.values():
            if _owned(principal, row) and row.idempotency_key == key:
                return row
        return None

    async def get(self, principal: Principal, invocation_id: UUID) -> ToolInvocationRecord | None:
        row = self.invocations.get(invocation_id)
        return row if row is not None and _owned(principal, row) else None

    async def open(
        self,
        principal: Principal,
        invocation: ToolInvocationRecord,
        approval: ApprovalRequestRecord | None,
    ) -> ToolInvocationRecord:
        if invocation.idempotency_key is not None:
            existing = await self.find(principal, invocation.idempotency_key)
            if existing is not None:
                return existing
        self.invocations[invocation.id] = invocation
        if approval is not None:
            self.approvals[approval.id] = approval
        return invocation

    async def approval(
        self, principal: Principal, invocation_id: UUID
    ) -> tuple[ApprovalRequestRecord | None, ApprovalDecisionRecord | None]:
        for request in self.approvals.values():
            if request.invocation_id == invocation_id and _owned(principal, request):
                return request, self.decisions.get(request.id)
        return None, None

    async def decide(
        self, principal: Principal, decision: ApprovalDecisionRecord, state: InvocationState
    ) -> None:
        request = self.approvals.get(decision.approval_id)
        if request is None or not _owned(principal, request):
            raise ConflictError(APPROVAL_DECIDED, "no open approval request")
        if decision.approval_id in self.decisions:
            raise ConflictError(APPROVAL_DECIDED, "the approval request is already decided")
        self.decisions[decision.approval_id] = decision
        row = self.invocations[request.invocation_id]
        self.invocations[row.id] = dataclasses.replace(
            row, state=state, updated_at=decision.decided_at
        )

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
    ) -> None:
        row = await self.get(principal, invocation_id)
        if row is None:
            return
        self.invocations[invocation_id] = dataclasses.replace(
            row,
            state=state,
            updated_at=at,
            reason_code=reason_code,
            output=output,
            output_bytes=output_bytes,
        )


class ConfiguredWebsiteBindings:
    """Website bindings by (tenant, principal, session) from configuration or a test."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, UUID], WebsiteBinding] = {}

    def bind(self, principal: Principal, session_id: UUID, binding: WebsiteBinding) -> None:
        self._rows[(principal.tenant_id, principal.principal_id, session_id)] = binding

    async def current(self, principal: Principal, session_id: UUID | None) -> WebsiteBinding | None:
        if session_id is None:
            return None
        return self._rows.get((principal.tenant_id, principal.principal_id, session_id))
