"""Approval: the policy that decides whether a call needs it, and the port that asks.

The default policy requires approval for every EXTERNAL_WRITE and EXTERNAL_DELETE
tool (spec "Model-callable creation" / "lifecycle"); reads run without one. The port
receives exactly the handler's view; an implementation shows it to the user (the
MCP edge elicits it from the client) or, in gates and tests, follows a script.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from scheduling.runtime.tool_pipeline.spec import SideEffect, ToolSpec

APPROVAL_EFFECTS = frozenset({SideEffect.EXTERNAL_WRITE, SideEffect.EXTERNAL_DELETE})


class ApprovalPolicy:
    """The default policy: every external write or delete waits for approval."""

    def requires_approval(self, spec: ToolSpec) -> bool:
        return spec.side_effect in APPROVAL_EFFECTS


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approver is asked: the tool, the principal, and the exact view."""

    approval_id: UUID
    invocation_id: UUID
    tool: str
    version: str
    tenant_id: str
    principal_id: str
    view: dict[str, Any]


@dataclass(frozen=True)
class ApprovalDecision:
    approved: bool
    decided_by: str


class ApprovalPort(Protocol):
    """Asks for one decision on one request (may wait for a person)."""

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision: ...


class ScriptedApprovals:
    """Decisions from a script (gates and tests): each request takes the next verdict;
    with the script exhausted, ``default`` applies. Every request is kept."""

    def __init__(self, verdicts: Iterable[bool] = (), *, default: bool = True) -> None:
        self._verdicts = deque(verdicts)
        self._default = default
        self.requests: list[ApprovalRequest] = []

    def push(self, *verdicts: bool) -> None:
        self._verdicts.extend(verdicts)

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        approved = self._verdicts.popleft() if self._verdicts else self._default
        return ApprovalDecision(approved=approved, decided_by="scripted-approver")
