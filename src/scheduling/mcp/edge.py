"""The MCP server over the governed tool pipeline.

* Tools listed: the default agent's roster, each with its closed input schema plus one
  ``idempotency_key`` field (required for every tool with an effect); the edge strips
  it into the ``ToolExecutionContext``. The SDK's own input validation is off so that
  the pipeline stays the one validator and its stable ``schedule.*`` codes reach the
  client unchanged.
* Authentication: a bearer token per request, resolved through the same digest-only
  token file and durable principal directory as the HTTP edge (``Authenticator``, built
  by ``bootstrap.edge_authenticator``); requests without a known token get HTTP 401
  before reaching the protocol, and the tool handler resolves the principal again from
  its own request (current scopes, so a revocation applies to the next call).
* Approval: ``ElicitedApprovals`` is the pipeline's approval port; it asks the calling
  client, inside the tool call, with an elicitation showing exactly the approval view.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Protocol

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.runtime.tool_pipeline import (
    ApprovalDecision,
    ApprovalRequest,
    Idempotency,
    SideEffect,
    ToolExecutionContext,
    ToolPipeline,
    ToolRegistry,
    ToolSpec,
)

UNAUTHENTICATED = reason(
    "schedule.mcp.unauthenticated", "The MCP request carries no known bearer token"
)
IDEMPOTENCY_FIELD = "idempotency_key"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


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


class ElicitedApprovals:
    """The approval port of the MCP edge: elicits the decision from the calling client."""

    def __init__(self, server: Server[Any, Any]) -> None:
        self._server = server

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        ctx = self._server.request_context
        message = json.dumps(
            {"approve_tool_call": request.tool, "version": request.version, "view": request.view},
            sort_keys=True,
            ensure_ascii=False,
        )
        answer = await ctx.session.elicit(
            message=message, requestedSchema=approval_schema(), related_request_id=ctx.request_id
        )
        approved = answer.action == "accept" and (answer.content or {}).get("approve") is True
        return ApprovalDecision(approved=approved, decided_by=f"mcp:{request.principal_id}")


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


class McpEdge:
    """One MCP server; ``approvals`` goes into the pipeline, then ``attach`` the pipeline
    and the authenticator (until then every request is unauthenticated)."""

    def __init__(self, name: str = "scheduling") -> None:
        self._authenticator: Authenticator | None = None
        self.server: Server[Any, Any] = Server(name)
        self.approvals = ElicitedApprovals(self.server)
        self._pipeline: ToolPipeline | None = None
        self._registry = ToolRegistry()
        self._roster: frozenset[str] = frozenset()
        self.server.list_tools()(self._list)  # type: ignore[no-untyped-call]
        self.server.call_tool(validate_input=False)(self._call)

    def attach(
        self, pipeline: ToolPipeline, roster: frozenset[str], authenticator: Authenticator
    ) -> None:
        self._pipeline, self._registry, self._roster = pipeline, pipeline.registry, roster
        self._authenticator = authenticator

    async def _principal(self, header: str | None) -> Principal | None:
        if self._authenticator is None:
            return None
        return await self._authenticator.principal(header)

    async def _list(self) -> list[types.Tool]:
        return [advertised(s) for s in self._registry.specs() if s.name in self._roster]

    async def _call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        request = self.server.request_context.request
        headers = getattr(request, "headers", {}) or {}
        principal = await self._principal(headers.get("authorization"))
        if principal is None or self._pipeline is None:
            return _result({"error": {"code": UNAUTHENTICATED}}, error=True)
        if name not in self._roster:
            return _result({"error": {"code": "schedule.tool.undeclared"}}, error=True)
        args = dict(arguments or {})
        key = args.pop(IDEMPOTENCY_FIELD, None)
        context = ToolExecutionContext(principal, str(key) if key is not None else "")
        result = await self._pipeline.call(name, args, context)
        return _result(result.to_json(), error=not result.ok)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Callable[[Scope, Receive, Send], Awaitable[None]]]:
        """The ASGI app (bearer check, then streamable HTTP) while its session manager runs."""
        manager = StreamableHTTPSessionManager(app=self.server, json_response=False)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
                if await self._principal(headers.get("authorization")) is None:
                    await _unauthorized(send)
                    return
            await manager.handle_request(scope, receive, send)

        async with manager.run():
            yield app


def _result(payload: dict[str, Any], *, error: bool) -> types.CallToolResult:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=json.loads(text),
        isError=error,
    )


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"error": {"code": UNAUTHENTICATED}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b"Bearer"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
