"""Tests of the tests: the MCP gate facet (src/gates/checks/test_model_mcp.py) reports
problems for plausible wrong edges, each built and served exactly as the right one
(``bootstrap.build_mcp(edge_type=...)`` over streamable HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from gates.checks.mcp_support import McpWorld, mcp_authorization_check, mcp_create_check
from scheduling.mcp import ElicitedApprovals, McpEdge
from scheduling.mcp.edge import Asgi, Receive, Scope, Send
from scheduling.runtime.tool_pipeline import ApprovalDecision, ApprovalRequest

pytestmark = pytest.mark.postgres


class AnswerIsApproval(ElicitedApprovals):
    """Counts any answer as approval (a decline or a cancel included)."""

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        await super().decide(request)
        return ApprovalDecision(approved=True, decided_by="wrong")


class AcceptIsApproval(ElicitedApprovals):
    """Reads the action only: an accepted form with approve=false approves."""

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        ctx = self._server.request_context
        answer = await ctx.session.elicit(
            message=json.dumps({"view": request.view}),
            requestedSchema={"type": "object"},
            related_request_id=ctx.request_id,
        )
        return ApprovalDecision(approved=answer.action == "accept", decided_by="wrong")


class NeverAsks(ElicitedApprovals):
    """Approves without asking the client."""

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(approved=True, decided_by="wrong")


def edge_with(approvals: type[ElicitedApprovals]) -> type[McpEdge]:
    return type(f"Edge{approvals.__name__}", (McpEdge,), {"approvals_type": approvals})


class DefaultSeparators(McpEdge):
    """Re-serializes every text with json.dumps' default separators (defect 5)."""

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        result = await super()._call(name, arguments)
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        block.text = json.dumps(json.loads(block.text), ensure_ascii=False)
        return result


class NoBearerCheck(McpEdge):
    """Lets any request reach the protocol (only the tool handler checks the token)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Asgi]:
        manager = StreamableHTTPSessionManager(app=self.server)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await manager.handle_request(scope, receive, send)

        async with manager.run():
            yield app


class ElicitsBeforeScope(McpEdge):
    """Asks for approval before the pipeline's scope check (a denied scope elicits)."""

    async def _call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        if name != "schedule.list":
            ctx = self.server.request_context
            await ctx.session.elicit(
                message="{}", requestedSchema={"type": "object"}, related_request_id=ctx.request_id
            )
        return await super()._call(name, arguments)


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        (edge_with(AnswerIsApproval), "declined"),
        (edge_with(AcceptIsApproval), "accepted-false"),
        (edge_with(NeverAsks), "elicitation"),
        (DefaultSeparators, "the model reads"),
    ],
)
async def test_the_create_facet_sees_a_wrong_edge(
    pg_url: str, edge: type[McpEdge], expected: str
) -> None:
    async with McpWorld.serving(pg_url, edge_type=edge) as world:
        problems, _ = await mcp_create_check(world)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("edge", "expected"),
    [
        (ElicitsBeforeScope, "missing scope"),
        (NoBearerCheck, "unknown token"),
        (edge_with(NeverAsks), "state while the approval was asked"),
        (DefaultSeparators, "the model reads"),
    ],
)
async def test_the_authorization_facet_sees_a_wrong_edge(
    pg_url: str, edge: type[McpEdge], expected: str
) -> None:
    async with McpWorld.serving(pg_url, edge_type=edge) as world:
        problems, _ = await mcp_authorization_check(world)
    assert any(expected in p for p in problems), problems
