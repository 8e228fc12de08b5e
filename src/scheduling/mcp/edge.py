"""The MCP server over the governed tool pipeline.

* Tools listed: the default agent's roster, each with its closed input schema plus one
  ``idempotency_key`` field (required for every tool with an effect); the edge strips
  it into the ``ToolExecutionContext``. The edge registers its own ``tools/call``
  handler (not the SDK decorator): no SDK input validation, no tool-cache warning that
  echoes a name, no raw exception text, so the pipeline stays the one validator and its
  stable ``schedule.*`` codes reach the client unchanged.
* Authentication: a bearer token resolved through the same digest-only token file and
  durable principal directory as the HTTP edge (``Authenticator``, built by
  ``bootstrap.edge_authenticator``). Streamable HTTP: every request carries
  ``Authorization: Bearer <token>``; requests without a known token get HTTP 401 before
  the protocol. stdio: the token is given once at start (ADR 2110) and resolved again on
  every call, so a revocation in the file or the directory applies to the next call.
* Approval: ``ElicitedApprovals`` is the pipeline's approval port; it asks the calling
  client, inside the tool call, with an elicitation showing exactly the approval view.
  Only ``accept`` with ``{"approve": true}`` approves; decline and cancel are denials;
  a timeout, an error answer or a closed connection is no answer (the pipeline's
  retryable ``schedule.tool.approval_timeout``, ADR 2121). A tool that needs approval,
  called by a client that did not declare the elicitation capability, fails closed
  with ``schedule.mcp.elicitation_unsupported`` before the pipeline runs (nothing
  written).
* Result bytes (ADR 2111): a success's one text block is the tool output in the compact
  canonical JSON the pipeline measured against ``maximum_output_bytes`` (the same
  separators and ``ensure_ascii=False``; key order does not change the size), and no
  ``structuredContent`` copy, so the text the model reads is never over the ceiling the
  pipeline enforced. The envelope (tool, version, status, replayed) rides in ``_meta``.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any, Protocol

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError
from mcp.shared.message import ServerMessageMetadata

from scheduling.domain.canonical import canonical_json
from scheduling.domain.errors import SchedulingError, UnavailableError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.domain.text import check_text
from scheduling.mcp.logs import quiet_sdk_logs
from scheduling.mcp.stdio import MAX_LINE_BYTES, stdio_transport
from scheduling.runtime.tool_pipeline import (
    INVALID_ARGUMENTS,
    TOOL_UNDECLARED,
    ApprovalDecision,
    ApprovalRequest,
    Idempotency,
    SideEffect,
    ToolExecutionContext,
    ToolPipeline,
    ToolRegistry,
    ToolResult,
    ToolSpec,
)

UNAUTHENTICATED = reason(
    "schedule.mcp.unauthenticated", "The MCP request carries no known bearer token"
)
ELICITATION_UNSUPPORTED = reason(
    "schedule.mcp.elicitation_unsupported",
    "The tool needs approval and the MCP client declared no elicitation capability",
)
INTERNAL = reason(
    "schedule.mcp.internal_error",
    "The MCP edge failed unexpectedly; the effect is unknown, retry with the same key",
)
BODY_TOO_LARGE = reason(
    "schedule.mcp.body_too_large", "The MCP request body exceeds the edge's byte limit"
)
IDEMPOTENCY_FIELD = "idempotency_key"
MAX_BODY_BYTES = MAX_LINE_BYTES
"""One message's byte limit, the same on both transports (a stdio line, an HTTP body)."""
RESULT_META = "scheduling/result"
DEFAULT_APPROVAL_TIMEOUT_SECONDS = 300.0
# The pipeline bounds the wait (ADR 2121); the edge's own bound on the elicitation is a
# backstop this much later, so the pipeline's retryable timeout is what a client sees.
ELICITATION_MARGIN_SECONDS = 5.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

_log = logging.getLogger(__name__)


class Authenticator(Protocol):
    """Resolves a request's ``Authorization`` header to its principal (current scopes)
    or ``None``; ``bootstrap.edge_authenticator`` builds the token-file one."""

    async def principal(self, header: str | None) -> Principal | None: ...


def approval_schema() -> dict[str, Any]:
    """What the client answers: one boolean."""
    return {
        "type": "object",
        "properties": {"approve": {"type": "boolean", "description": "Run this call?"}},
        "required": ["approve"],
    }


def can_elicit(session: Any) -> bool:
    """Whether the client declared form elicitation at initialize (an empty
    ``elicitation`` object means form mode, as the protocol's first revision had it)."""
    params = getattr(session, "client_params", None)
    caps = None if params is None else params.capabilities.elicitation
    return caps is not None and (caps.form is not None or caps.url is None)


def approved_by(answer: types.ElicitResult) -> bool:
    """Only an accepted form whose ``approve`` is exactly ``true`` approves."""
    return answer.action == "accept" and (answer.content or {}).get("approve") is True


class ApprovalUnanswered(Exception):
    """The elicitation ended without an answer: a timeout, an error answer, a closed
    connection. The pipeline takes it for no answer (ADR 2121): the retryable
    ``schedule.tool.approval_timeout``, nothing decided, the same key asks again."""


class ElicitedApprovals:
    """The approval port of the MCP edge: elicits the decision from the calling client.

    Fails closed: only ``accept`` with ``approve: true`` approves; decline and cancel
    are denials; no answer raises ``ApprovalUnanswered``; a client without the
    elicitation capability is a denial (the edge refuses such a call before it gets
    here)."""

    def __init__(
        self, server: Server[Any, Any], timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS
    ) -> None:
        self._server = server
        self.timeout_seconds = timeout_seconds + ELICITATION_MARGIN_SECONDS

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        ctx = self._server.request_context
        if not can_elicit(ctx.session):
            return ApprovalDecision(approved=False, decided_by="mcp:elicitation-unsupported")
        message = canonical_json(
            {"approve_tool_call": request.tool, "version": request.version, "view": request.view}
        )
        ask = types.ServerRequest(
            types.ElicitRequest(
                params=types.ElicitRequestFormParams(
                    message=message, requestedSchema=approval_schema()
                )
            )
        )
        try:
            answer = await ctx.session.send_request(
                ask,
                types.ElicitResult,
                request_read_timeout_seconds=timedelta(seconds=self.timeout_seconds),
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
        except McpError as exc:  # timeout, an error answer, the connection closed
            _log.info("approval unanswered: elicitation ended with %s", exc.error.code)
            raise ApprovalUnanswered(exc.error.code) from None
        return ApprovalDecision(
            approved=approved_by(answer), decided_by=f"mcp:{request.principal_id}"
        )


def advertised(spec: ToolSpec) -> types.Tool:
    schema = copy.deepcopy(dict(spec.input_schema))
    schema.setdefault("properties", {})[IDEMPOTENCY_FIELD] = {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "description": "The same key on a retry returns the original result.",
    }
    if spec.idempotency is not Idempotency.READ_ONLY:
        schema["required"] = [*schema.get("required", []), IDEMPOTENCY_FIELD]
    return types.Tool(
        name=spec.name,
        description=spec.description,
        inputSchema=schema,
        annotations=types.ToolAnnotations(
            readOnlyHint=spec.side_effect is SideEffect.NONE,
            destructiveHint=spec.side_effect is SideEffect.EXTERNAL_DELETE,
            idempotentHint=spec.idempotency is not Idempotency.NON_IDEMPOTENT,
            openWorldHint=False,
        ),
    )


def result_text(output: dict[str, Any]) -> str:
    """The text block of a successful call: the output exactly as the pipeline measured
    it (compact separators, ``ensure_ascii=False``; ``output_bytes`` is its UTF-8 size)."""
    return canonical_json(output)


def tool_result(result: ToolResult) -> types.CallToolResult:
    """The MCP form of a pipeline result (see the module docstring, ADR 2111)."""
    envelope = result.to_json()
    if result.ok and result.output is not None:
        text = result_text(result.output)
    else:
        text = _safe_text(envelope)
    meta = {k: envelope[k] for k in ("tool", "version", "status", "replayed")}
    if result.invocation_id is not None:
        meta["invocation_id"] = str(result.invocation_id)
    return types.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": text}],
            "isError": not result.ok,
            "_meta": {RESULT_META: meta},
        }
    )


def failure(code: str, *, retryable: bool = False, **details: Any) -> types.CallToolResult:
    """An edge-level failure (no pipeline result): the same ``error`` shape."""
    body = {"error": {"code": code, "retryable": retryable, "details": details}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_safe_text(body))], isError=True
    )


def _safe_text(payload: dict[str, Any]) -> str:
    """Compact JSON that is always encodable: a lone surrogate would make the transport
    fail to serialize the response, so a payload holding one is sent ASCII-escaped."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(payload, separators=(",", ":"), ensure_ascii=True, default=str)
    return text


class McpEdge:
    """One MCP server; ``approvals`` goes into the pipeline, then ``attach`` the pipeline
    and the authenticator (until then every request is unauthenticated)."""

    approvals_type: type[ElicitedApprovals] = ElicitedApprovals

    def __init__(
        self,
        name: str = "scheduling",
        *,
        approval_timeout_seconds: float = DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    ) -> None:
        self._authenticator: Authenticator | None = None
        self.server: Server[Any, Any] = Server(name)
        self.approvals = self.approvals_type(self.server, approval_timeout_seconds)
        self._pipeline: ToolPipeline | None = None
        self._registry = ToolRegistry()
        self._roster: frozenset[str] = frozenset()
        self._stdio_header: str | None = None
        self.server.list_tools()(self._list)  # type: ignore[no-untyped-call]
        self.server.request_handlers[types.CallToolRequest] = self._handle_call

    def attach(
        self, pipeline: ToolPipeline, roster: frozenset[str], authenticator: Authenticator
    ) -> None:
        self._pipeline, self._registry, self._roster = pipeline, pipeline.registry, roster
        self._authenticator = authenticator

    async def principal(self, header: str | None) -> Principal | None:
        if self._authenticator is None:
            return None
        return await self._authenticator.principal(header)

    async def _list(self) -> list[types.Tool]:
        return [advertised(s) for s in self._registry.specs() if s.name in self._roster]

    def _header(self) -> str | None:
        """The caller's credential: the HTTP request's header, or stdio's start token."""
        request = self.server.request_context.request
        if request is None:
            return self._stdio_header
        headers = getattr(request, "headers", None) or {}
        value = headers.get("authorization")
        return value if isinstance(value, str) else None

    async def _handle_call(self, req: types.CallToolRequest) -> types.ServerResult:
        try:
            result = await self._call(req.params.name, req.params.arguments)
        except SchedulingError as exc:  # the pipeline's ports may raise (a lost database)
            result = failure(exc.code, retryable=isinstance(exc, UnavailableError))
        except Exception:  # never the raw exception text, never the arguments
            _log.error("tools/call failed unexpectedly", exc_info=True)
            result = failure(INTERNAL, retryable=True)
        return types.ServerResult(result)

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        principal = await self.principal(self._header())
        if principal is None or self._pipeline is None:
            return failure(UNAUTHENTICATED)
        if name not in self._roster:
            return failure(TOOL_UNDECLARED)
        args = dict(arguments or {})
        key = args.pop(IDEMPOTENCY_FIELD, None)
        if key is not None and not isinstance(key, str):
            return failure(INVALID_ARGUMENTS, field=IDEMPOTENCY_FIELD, problem="not a string")
        if key is not None:
            try:
                check_text(IDEMPOTENCY_FIELD, key)
            except SchedulingError as exc:
                return failure(exc.code, **exc.details)
        if self._needs_approval(name) and not can_elicit(self.server.request_context.session):
            return failure(ELICITATION_UNSUPPORTED)
        context = ToolExecutionContext(principal, key or "")
        return tool_result(await self._pipeline.call(name, args, context))

    def _needs_approval(self, name: str) -> bool:
        gov = None if self._pipeline is None else self._pipeline.governance
        spec = self._registry.get(name)
        return gov is not None and spec is not None and gov.policy.requires_approval(spec.spec)

    # ------------------------------------------------------------------ transports

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Asgi]:
        """The ASGI app (bearer check, then streamable HTTP) while its session manager runs."""
        quiet_sdk_logs()
        manager = StreamableHTTPSessionManager(app=self.server, json_response=False)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
                if await self.principal(headers.get("authorization")) is None:
                    await _refuse(send, 401, UNAUTHENTICATED)
                    return
                if scope.get("method") == "POST":
                    body = await _body(receive, MAX_BODY_BYTES)
                    if body is None:
                        await _refuse(send, 413, BODY_TOO_LARGE)
                        return
                    receive = _replay(_parseable(body), receive)
            await manager.handle_request(scope, receive, send)

        async with manager.run():
            yield app

    async def serve_stdio(self, token: str, stdin: Any = None, stdout: Any = None) -> None:
        """Serve one client over stdin/stdout as the principal ``token`` names (resolved
        again on every call). Returns when the client closes stdin or stdout."""
        quiet_sdk_logs()
        self._stdio_header = f"Bearer {token}"
        async with stdio_transport(stdin, stdout) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect: what arrived is all
            break
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _parseable(body: bytes) -> bytes:
    """The body the SDK is handed: ``body`` unchanged when it is UTF-8 JSON; when it is
    JSON once its invalid bytes are read as lone surrogates (``surrogateescape``), that
    JSON ASCII-escaped, so the text validator refuses those strings with
    ``schedule.text.invalid`` (the SDK would raise on the bytes and log a traceback).
    Anything else, including JSON the SDK's parser would raise on instead of refusing
    (nested past its recursion limit, an integer past Python's digit limit: a 500 and a
    traceback), is sent on as ``{``, whose parse error the SDK answers (400)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    try:
        document = json.loads(
            body.decode("utf-8", errors="surrogateescape") if text is None else text
        )
    except (ValueError, RecursionError):
        return b"{"  # not JSON to the SDK: it answers its parse error
    return body if text is not None else json.dumps(document, ensure_ascii=True).encode("ascii")


def _replay(body: bytes, original: Receive) -> Receive:
    """``body`` as one message, then the connection's own messages (a disconnect is
    what an open event stream waits for)."""
    sent = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await original()

    return receive


async def _refuse(send: Send, status: int, code: str) -> None:
    body = json.dumps({"error": {"code": code}}).encode()
    headers = [(b"content-type", b"application/json")]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
