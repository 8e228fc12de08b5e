"""What a governed invocation carries in (``ToolExecutionContext``) and out (``ToolResult``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from uuid import UUID

from scheduling.domain.identity import Principal


@dataclass(frozen=True)
class ToolExecutionContext:
    """The authenticated principal, the invocation's idempotency key, and where the call
    comes from (the run and the chat session; either may be absent)."""

    principal: Principal
    idempotency_key: str
    run_id: UUID | None = None
    session_id: UUID | None = None


@dataclass(frozen=True)
class PreparedCall:
    """A validated call: the approval view (exactly what the approver sees) and the
    effect, run only after approval."""

    view: dict[str, Any]
    execute: Callable[[], Awaitable[dict[str, Any]]]


class ToolStatus(StrEnum):
    SUCCEEDED = "succeeded"
    DENIED = "denied"  # the exact-scope check refused it before approval
    REJECTED = "rejected"  # the approver declined it
    FAILED = "failed"


@dataclass(frozen=True)
class ToolResult:
    """One invocation's outcome. Failures carry a stable ``schedule.*`` code; ``retryable``
    is False for argument, not-found, conflict and authorization failures."""

    tool: str
    version: str
    status: ToolStatus
    output: dict[str, Any] | None = None
    reason_code: str | None = None
    retryable: bool = False
    replayed: bool = False
    invocation_id: UUID | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is ToolStatus.SUCCEEDED

    def to_json(self) -> dict[str, Any]:
        """The model-facing form (MCP structured content, transcripts)."""
        out: dict[str, Any] = {"tool": self.tool, "version": self.version, "status": self.status}
        if self.output is not None:
            out["output"] = self.output
        if self.reason_code is not None:
            out["error"] = {
                "code": self.reason_code,
                "retryable": self.retryable,
                "details": self.details,
            }
        out["replayed"] = self.replayed
        return out
