"""The ordinary tool pipeline.

A scheduled run's tool call (``check`` then ``invoke``): the tool is registered, the
run's pinned agent version declares it, and every scope it requires is in the run's
``requested_scopes`` snapshot; output is cut to the byte ceiling.

A governed call (``call``), in this order, each step before anything later:

1. the tool is registered (``schedule.tool.unknown``);
2. the exact-scope check against the invocation's principal
   (``schedule.auth.scope_required``, the service's own code): a denied call writes
   nothing, asks nobody and runs nothing;
3. the boundary text check of every argument string (``schedule.text.invalid``), the
   closed input schema (``schedule.tool.invalid_arguments``), the tool's normalizer
   (its domain codes) and the key;
4. the durable ledger by idempotency key: the same key with the same tool, version and
   normalized arguments replays the recorded result (or resumes an approved call that
   crashed before its result was recorded); different content is
   ``schedule.idempotency.key_reused`` with no effect;
5. the handler's ``prepare`` of the normalized arguments (argument and not-found
   failures with the service's codes, before approval);
6. approval, when the policy requires it (every external write or delete): invocation
   and approval request recorded together, then the decision. A resumed invocation
   (found by its key, not final) runs or asks only when the freshly prepared view
   hashes to the recorded request's ``view_hash``; otherwise it fails closed for good
   with ``schedule.tool.approval_stale`` (ADR 2101): an approval covers exactly the
   view the approver saw. The wait for the decision is bounded by
   ``Governance.approval_timeout_seconds`` (real time: ``asyncio.wait_for``, ADR 2121);
   no answer in time, or an approval port that raises, is the retryable
   ``schedule.tool.approval_timeout``: nothing is decided or run, the invocation stays
   AWAITING_APPROVAL, and a retry with the same key asks again (same view only);
7. the effect under the tool's timeout, the output under its byte ceiling, and the
   result recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduling.domain.canonical import content_hash
from scheduling.domain.errors import (
    AuthorizationError,
    ConflictError,
    SchedulingError,
    UnavailableError,
    ValidationError,
)
from scheduling.domain.idempotency import check_idempotency_key
from scheduling.domain.identity import SCOPE_REQUIRED
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.repositories import KEY_REUSED
from scheduling.ports.runtime import ToolCall
from scheduling.ports.tool_ledger import (
    ApprovalDecisionRecord,
    ApprovalRequestRecord,
    InvocationState,
    ToolInvocationRecord,
    ToolLedger,
)
from scheduling.runtime.tool_pipeline.approval import (
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalPort,
    ApprovalRequest,
)
from scheduling.runtime.tool_pipeline.arguments import arguments_hash, validate_arguments
from scheduling.runtime.tool_pipeline.context import (
    PreparedCall,
    ToolExecutionContext,
    ToolResult,
    ToolStatus,
)
from scheduling.runtime.tool_pipeline.registry import RegisteredTool, ToolHandler, ToolRegistry
from scheduling.runtime.tool_pipeline.spec import Idempotency

TOOL_UNKNOWN = reason("schedule.tool.unknown", "The tool is not in the tool registry")
TOOL_UNDECLARED = reason(
    "schedule.tool.undeclared", "The run's agent version does not declare the tool"
)
TOOL_SCOPE_DENIED = reason(
    "schedule.tool.scope_denied", "A scope the tool requires is not in the run's scope snapshot"
)
APPROVAL_DENIED = reason("schedule.tool.approval_denied", "The approver declined the tool call")
TOOL_TIMEOUT = reason(
    "schedule.tool.timeout", "The tool did not finish within its timeout (retry with the same key)"
)
OUTPUT_TOO_LARGE = reason(
    "schedule.tool.output_too_large", "The tool's output exceeds its maximum_output_bytes"
)
APPROVAL_STALE = reason(
    "schedule.tool.approval_stale",
    "The call's view changed since it was shown for approval; retry with a new key to ask again",
)
NOT_GOVERNED = reason(
    "schedule.tool.not_governed", "The pipeline has no ledger or approval port for governed calls"
)
APPROVAL_TIMEOUT = reason(
    "schedule.tool.approval_timeout",
    "No approval decision arrived in time (or the approver was unreachable); nothing ran,"
    " retry with the same key to ask again",
)
DEFAULT_APPROVAL_TIMEOUT_SECONDS = 300.0

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolDecision:
    """The run-path verdict for one call; ``reason_code`` is set when denied."""

    tool: str
    allowed: bool
    reason_code: str | None = None
    missing_scopes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ToolOutput:
    """A run tool's output after the ceiling: ``truncated`` when bytes were cut."""

    text: str
    original_bytes: int
    truncated: bool


def cut_to_bytes(text: str, ceiling: int) -> tuple[str, int, bool]:
    """``text`` cut to at most ``ceiling`` UTF-8 bytes without splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= ceiling:
        return text, len(data), False
    return data[:ceiling].decode("utf-8", errors="ignore"), len(data), True


def output_bytes(output: Mapping[str, Any]) -> int:
    """The size of a governed tool's output as the model receives it (compact UTF-8 JSON)."""
    return len(json.dumps(output, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def declared_tools(agent_spec: Mapping[str, Any]) -> frozenset[str]:
    """The tool names an AgentSpec declares (``spec["tools"]``: names or {"name": ...})."""
    names: set[str] = set()
    for item in agent_spec.get("tools", ()) or ():
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.add(item["name"])
    return frozenset(names)


@dataclass
class Governance:
    """What governed calls need besides the registry."""

    ledger: ToolLedger
    approvals: ApprovalPort
    clock: Clock
    ids: IdGenerator
    policy: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    """The longest wait for one approval decision, in real seconds (``asyncio.wait_for``:
    the virtual clock cannot bound a person's answer; ADR 2121)."""


class ToolPipeline:
    """Check, then invoke. The scope check runs before anything else (approval, dispatch)."""

    def __init__(self, registry: ToolRegistry, governance: Governance | None = None) -> None:
        self.registry = registry
        self.governance = governance

    # ------------------------------------------------------------ a scheduled run's tools

    def check(
        self, call: ToolCall, run_scopes: frozenset[str], agent_spec: Mapping[str, Any]
    ) -> ToolDecision:
        tool = self.registry.get(call.name)
        if tool is None:
            return ToolDecision(call.name, False, TOOL_UNKNOWN)
        if call.name not in declared_tools(agent_spec):
            return ToolDecision(call.name, False, TOOL_UNDECLARED)
        missing = tool.spec.required_scopes - run_scopes
        if missing:
            return ToolDecision(call.name, False, TOOL_SCOPE_DENIED, frozenset(missing))
        return ToolDecision(call.name, True)

    def invoke(self, call: ToolCall) -> ToolOutput:
        """Run an allowed run tool's handler and apply the ceiling (``check`` first)."""
        tool = self.registry.get(call.name)
        if tool is None or tool.text_handler is None:
            raise ValidationError(TOOL_UNKNOWN, "the tool is not registered", {"tool": call.name})
        text, size, truncated = cut_to_bytes(
            tool.text_handler(call.arguments), tool.spec.maximum_output_bytes
        )
        return ToolOutput(text=text, original_bytes=size, truncated=truncated)

    # ------------------------------------------------------------ governed calls

    async def call(
        self,
        name: str,
        arguments: object,
        context: ToolExecutionContext,
        *,
        version: str | None = None,
    ) -> ToolResult:
        """One governed invocation through every step above (never raises a domain error)."""
        tool = self.registry.get(name, version)
        if tool is None or tool.handler is None:
            return ToolResult(name, version or "", ToolStatus.FAILED, reason_code=TOOL_UNKNOWN)
        spec = tool.spec
        missing = sorted(spec.required_scopes - context.principal.scopes)
        if missing:
            return ToolResult(
                spec.name,
                spec.version,
                ToolStatus.DENIED,
                reason_code=SCOPE_REQUIRED,
                details={"missing_scopes": missing},
            )
        gov = self.governance
        if gov is None:
            return self._failure(tool, UnavailableError(NOT_GOVERNED, "no governance wired"))
        try:
            plain = validate_arguments(spec, arguments)
            if tool.normalize is not None:
                plain = tool.normalize(plain)
            keyed = spec.idempotency is not Idempotency.READ_ONLY
            if keyed:
                check_idempotency_key(context.idempotency_key)
        except SchedulingError as exc:
            return self._failure(tool, exc)
        digest = arguments_hash(spec, plain)
        if not keyed:
            return await self._read(gov, tool, tool.handler, plain, context, digest)
        return await self._governed(gov, tool, tool.handler, plain, context, digest)

    async def _read(
        self,
        gov: Governance,
        tool: RegisteredTool,
        handler: ToolHandler,
        plain: dict[str, Any],
        context: ToolExecutionContext,
        digest: str,
    ) -> ToolResult:
        try:
            prepared = await handler.prepare(plain, context)
        except SchedulingError as exc:
            return self._failure(tool, exc)
        record = await gov.ledger.open(
            context.principal, self._record(gov, tool, context, digest, keyed=False), None
        )
        return await self._execute(gov, tool, prepared, context, record)

    async def _governed(
        self,
        gov: Governance,
        tool: RegisteredTool,
        handler: ToolHandler,
        plain: dict[str, Any],
        context: ToolExecutionContext,
        digest: str,
    ) -> ToolResult:
        spec = tool.spec
        existing = await gov.ledger.find(context.principal, context.idempotency_key)
        if existing is not None:
            if (existing.tool_name, existing.tool_version, existing.arguments_hash) != (
                spec.name,
                spec.version,
                digest,
            ):
                return self._failure(
                    tool, ConflictError(KEY_REUSED, "the idempotency key was used before")
                )
            replay = self._replay(tool, existing)
            if replay is not None:
                return replay
        try:
            prepared = await handler.prepare(plain, context)
        except SchedulingError as exc:
            return self._failure(tool, exc)
        record = existing
        if record is None:
            opened, inserted = await self._open(gov, tool, prepared, context, digest)
            if opened.arguments_hash != digest or opened.tool_name != spec.name:
                return self._failure(
                    tool, ConflictError(KEY_REUSED, "the idempotency key was used before")
                )
            replay = self._replay(tool, opened)
            if replay is not None:
                return replay
            # A concurrent call with the same key opened first: resume it as found.
            record, existing = opened, None if inserted else opened
        if existing is not None:
            stale = await self._stale(gov, tool, prepared, context, record)
            if stale is not None:
                return stale
        if record.state is InvocationState.AWAITING_APPROVAL:
            approved = await self._approve(gov, tool, prepared, context, record)
            if approved is not None:
                return approved
        return await self._execute(gov, tool, prepared, context, record)

    async def _stale(
        self,
        gov: Governance,
        tool: RegisteredTool,
        prepared: PreparedCall,
        context: ToolExecutionContext,
        record: ToolInvocationRecord,
    ) -> ToolResult | None:
        """A resumed invocation's approval must cover the view prepared now: when the
        recorded request's hash differs, fail closed (recorded FAILED, so the key keeps
        refusing) without asking or running anything."""
        request, _ = await gov.ledger.approval(context.principal, record.id)
        if request is None or request.view_hash == content_hash(prepared.view):
            return None
        await gov.ledger.finish(
            context.principal,
            record.id,
            state=InvocationState.FAILED,
            at=gov.clock.now(),
            reason_code=APPROVAL_STALE,
        )
        return ToolResult(
            tool.spec.name,
            tool.spec.version,
            ToolStatus.FAILED,
            reason_code=APPROVAL_STALE,
            invocation_id=record.id,
        )

    def _record(
        self,
        gov: Governance,
        tool: RegisteredTool,
        context: ToolExecutionContext,
        digest: str,
        *,
        keyed: bool,
        state: InvocationState = InvocationState.APPROVED,
    ) -> ToolInvocationRecord:
        now = gov.clock.now()
        return ToolInvocationRecord(
            id=gov.ids.new_uuid(),
            tenant_id=context.principal.tenant_id,
            principal_id=context.principal.principal_id,
            idempotency_key=context.idempotency_key if keyed else None,
            tool_name=tool.spec.name,
            tool_version=tool.spec.version,
            arguments_hash=digest,
            state=state,
            created_at=now,
            updated_at=now,
            run_id=context.run_id,
            session_id=context.session_id,
        )

    async def _open(
        self,
        gov: Governance,
        tool: RegisteredTool,
        prepared: PreparedCall,
        context: ToolExecutionContext,
        digest: str,
    ) -> tuple[ToolInvocationRecord, bool]:
        """The stored invocation, and whether it is the one this call inserted."""
        needs = gov.policy.requires_approval(tool.spec)
        state = InvocationState.AWAITING_APPROVAL if needs else InvocationState.APPROVED
        record = self._record(gov, tool, context, digest, keyed=True, state=state)
        approval = None
        if needs:
            approval = ApprovalRequestRecord(
                id=gov.ids.new_uuid(),
                invocation_id=record.id,
                tenant_id=record.tenant_id,
                principal_id=record.principal_id,
                view_hash=content_hash(prepared.view),
                requested_at=record.created_at,
            )
        stored = await gov.ledger.open(context.principal, record, approval)
        return stored, stored.id == record.id

    async def _approve(
        self,
        gov: Governance,
        tool: RegisteredTool,
        prepared: PreparedCall,
        context: ToolExecutionContext,
        record: ToolInvocationRecord,
    ) -> ToolResult | None:
        """Ask for the decision; a result when the call must stop here, else None."""
        request, decision = await gov.ledger.approval(context.principal, record.id)
        if request is None:  # pragma: no cover - open writes both rows together
            return self._failure(tool, UnavailableError(NOT_GOVERNED, "approval row missing"))
        if decision is None:
            answer = await self._ask(
                gov,
                ApprovalRequest(
                    approval_id=request.id,
                    invocation_id=record.id,
                    tool=tool.spec.name,
                    version=tool.spec.version,
                    tenant_id=record.tenant_id,
                    principal_id=record.principal_id,
                    view=prepared.view,
                ),
            )
            if answer is None:
                # Nothing decided: the invocation stays AWAITING_APPROVAL, so a retry with
                # the same key (and the same view, ``_stale``) asks again.
                return ToolResult(
                    tool.spec.name,
                    tool.spec.version,
                    ToolStatus.FAILED,
                    reason_code=APPROVAL_TIMEOUT,
                    retryable=True,
                    invocation_id=record.id,
                )
            decision = ApprovalDecisionRecord(
                approval_id=request.id,
                tenant_id=record.tenant_id,
                principal_id=record.principal_id,
                approved=answer.approved,
                decided_by=answer.decided_by,
                decided_at=gov.clock.now(),
            )
            state = InvocationState.APPROVED if answer.approved else InvocationState.DENIED
            try:
                await gov.ledger.decide(context.principal, decision, state)
            except ConflictError:
                # A concurrent retry decided first; its decision stands.
                _, decision = await gov.ledger.approval(context.principal, record.id)
                if decision is None:  # pragma: no cover
                    raise
        if not decision.approved:
            return ToolResult(
                tool.spec.name,
                tool.spec.version,
                ToolStatus.REJECTED,
                reason_code=APPROVAL_DENIED,
                invocation_id=record.id,
            )
        return None

    async def _ask(self, gov: Governance, request: ApprovalRequest) -> ApprovalDecision | None:
        """The approver's answer within the approval timeout; None when none came (the
        wait timed out, or the port raised: unreachable, or its own timeout)."""
        try:
            return await asyncio.wait_for(
                gov.approvals.decide(request), timeout=gov.approval_timeout_seconds
            )
        except Exception as exc:  # TimeoutError included: no answer, nothing decided
            _log.warning("no approval decision for %s: %s", request.tool, type(exc).__name__)
            return None

    async def _execute(
        self,
        gov: Governance,
        tool: RegisteredTool,
        prepared: PreparedCall,
        context: ToolExecutionContext,
        record: ToolInvocationRecord,
    ) -> ToolResult:
        spec = tool.spec
        try:
            output = await asyncio.wait_for(prepared.execute(), timeout=spec.timeout_seconds)
        except TimeoutError:
            # The effect is unknown: the record stays APPROVED so a retry with the same
            # key resumes it (the service's own ledger or state rules make it once).
            return ToolResult(
                spec.name,
                spec.version,
                ToolStatus.FAILED,
                reason_code=TOOL_TIMEOUT,
                retryable=True,
                invocation_id=record.id,
            )
        except SchedulingError as exc:
            failed = self._failure(tool, exc, invocation_id=record.id)
            if not failed.retryable:
                await gov.ledger.finish(
                    context.principal,
                    record.id,
                    state=InvocationState.FAILED,
                    at=gov.clock.now(),
                    reason_code=exc.code,
                )
            return failed
        size = output_bytes(output)
        if size > spec.maximum_output_bytes:
            await gov.ledger.finish(
                context.principal,
                record.id,
                state=InvocationState.FAILED,
                at=gov.clock.now(),
                reason_code=OUTPUT_TOO_LARGE,
                output_bytes=size,
            )
            return ToolResult(
                spec.name,
                spec.version,
                ToolStatus.FAILED,
                reason_code=OUTPUT_TOO_LARGE,
                invocation_id=record.id,
                details={"output_bytes": size, "maximum_output_bytes": spec.maximum_output_bytes},
            )
        keep = output if record.idempotency_key is not None else None
        await gov.ledger.finish(
            context.principal,
            record.id,
            state=InvocationState.SUCCEEDED,
            at=gov.clock.now(),
            output=keep,
            output_bytes=size,
        )
        return ToolResult(
            spec.name, spec.version, ToolStatus.SUCCEEDED, output=output, invocation_id=record.id
        )

    def _replay(self, tool: RegisteredTool, record: ToolInvocationRecord) -> ToolResult | None:
        """The recorded result of a finished invocation (None: not finished yet)."""
        output: dict[str, Any] | None = None
        code: str | None = None
        if record.state is InvocationState.SUCCEEDED:
            status, output = ToolStatus.SUCCEEDED, dict(record.output or {})
            if "replayed" in output:
                output["replayed"] = True
        elif record.state is InvocationState.DENIED:
            status, code = ToolStatus.REJECTED, APPROVAL_DENIED
        elif record.state is InvocationState.FAILED:
            status, code = ToolStatus.FAILED, record.reason_code
        else:
            return None
        return ToolResult(
            tool.spec.name,
            tool.spec.version,
            status,
            output=output,
            reason_code=code,
            replayed=True,
            invocation_id=record.id,
        )

    def _failure(
        self, tool: RegisteredTool, exc: SchedulingError, *, invocation_id: Any = None
    ) -> ToolResult:
        retryable = isinstance(exc, UnavailableError)
        status = ToolStatus.DENIED if isinstance(exc, AuthorizationError) else ToolStatus.FAILED
        return ToolResult(
            tool.spec.name,
            tool.spec.version,
            status,
            reason_code=exc.code,
            retryable=retryable,
            invocation_id=invocation_id,
            details=dict(exc.details),
        )
