"""The MCP edge driven by the SDK's own client over streamable HTTP on loopback.

A uvicorn server in this event loop serves ``McpEdge`` over the real tool pipeline
(``bootstrap.build_tools`` on PostgreSQL, through ``ToolWorld``). The client lists the
roster's tools, creates a schedule whose approval it completes through elicitation,
declines a pause (nothing changes), replays a key, and is refused without a token or
without the scope (no elicitation is ever sent for a denied scope).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gates.checks.tool_support import OTHER, WHO, ToolWorld
from scheduling import bootstrap as b
from scheduling.adapters.token_file import issue_token, revoke_token
from scheduling.mcp import McpEdge
from simulation.worlds.service import START, principal

pytestmark = pytest.mark.postgres
# A principal of its own: its scopes come from the durable directory, never the token.
READER = principal("mcp-reader", scopes={"schedule.read"})


@dataclass
class Served:
    url: str
    world: ToolWorld
    tokens: Path
    owner: str
    reader: str
    owner_id: str


class Approver:
    def __init__(self, *verdicts: bool) -> None:
        self.verdicts = list(verdicts)
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.messages.append(json.loads(params.message))
        approve = self.verdicts.pop(0)
        return types.ElicitResult(action="accept", content={"approve": approve})


@asynccontextmanager
async def client_session(url: str, token: str, approver: Approver) -> AsyncIterator[ClientSession]:
    """The SDK's client over streamable HTTP with a bearer header on every request."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write, elicitation_callback=approver) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def serving(url: str) -> AsyncIterator[Served]:
    """The edge over a real token file (digests only) and the durable directory."""
    edge = McpEdge()
    world = await ToolWorld.open(url, approval_port=edge.approvals, principals=(WHO, OTHER, READER))
    assert world.role.api is not None
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-") as tmp:
        path = Path(tmp) / "tokens.json"
        owner_entry, owner = issue_token(path, WHO.tenant_id, WHO.principal_id, START)
        _, reader = issue_token(path, READER.tenant_id, READER.principal_id, START)
        assert owner not in path.read_text()  # the file keeps digests only
        authenticator = b.edge_authenticator(world.role.api.principals, b.token_file(path))
        edge.attach(world.pipeline, world.role.roster, authenticator)
        try:
            async with edge.running() as app:
                config = uvicorn.Config(
                    app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", ws="none"
                )
                server = uvicorn.Server(config)
                task = asyncio.create_task(server.serve())
                for _ in range(500):  # uvicorn offers no started event; poll its flag
                    if server.started:
                        break
                    await asyncio.sleep(0.01)
                port = server.servers[0].sockets[0].getsockname()[1]
                try:
                    yield Served(
                        f"http://127.0.0.1:{port}/mcp/",
                        world,
                        path,
                        owner,
                        reader,
                        owner_entry.token_id,
                    )
                finally:
                    server.should_exit = True
                    await task
        finally:
            await world.close()


def payload(result: types.CallToolResult) -> dict[str, Any]:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


async def test_the_sdk_client_creates_and_approves_through_elicitation(pg_url: str) -> None:
    async with serving(pg_url) as served:
        url, world = served.url, served.world
        approver = Approver(True, False)
        async with client_session(url, served.owner, approver) as session:
            listed = await session.list_tools()
            names = sorted(t.name for t in listed.tools)
            assert names == sorted(
                [
                    "schedule.cancel",
                    "schedule.create",
                    "schedule.list",
                    "schedule.pause",
                    "schedule.resume",
                    "schedule.update",
                ]
            )
            create = next(t for t in listed.tools if t.name == "schedule.create")
            assert "idempotency_key" in create.inputSchema["required"]
            assert create.inputSchema["additionalProperties"] is False
            args = {
                "title": "Stretch",
                "instruction": "Remind me to stretch.",
                "at": world.later(days=1),
                "idempotency_key": "mcp-1",
            }
            made = await session.call_tool("schedule.create", args)
            assert not made.isError, payload(made)
            out = payload(made)["output"]
            assert approver.messages[0]["view"]["title"] == "Stretch"
            assert approver.messages[0]["view"]["requested_scopes"] == []
            again = await session.call_tool("schedule.create", args)
            assert payload(again)["output"]["schedule_id"] == out["schedule_id"]
            assert payload(again)["replayed"] is True
            assert len(approver.messages) == 1
            declined = await session.call_tool(
                "schedule.pause",
                {
                    "schedule_id": out["schedule_id"],
                    "expected_revision": 1,
                    "idempotency_key": "mcp-2",
                },
            )
            assert declined.isError
            assert payload(declined)["error"]["code"] == "schedule.tool.approval_denied"
            assert approver.messages[1]["view"]["action"] == "pause"
            bad = await session.call_tool("schedule.list", {"limit": 99})
            assert payload(bad)["error"]["code"] == "schedule.tool.invalid_arguments"
        row = await world.schedule(out["schedule_id"])
        assert row["state"] == "ACTIVE"
        assert (await world.counts())["schedules"] == 1


async def test_without_token_or_scope_nothing_happens(pg_url: str) -> None:
    async with serving(pg_url) as served:
        url, world = served.url, served.world
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient() as client:
            for headers in ({}, {"Authorization": "Bearer sch_not_a_token"}):
                response = await client.post(url, json=ping, headers=headers)
                assert response.status_code == 401
                assert response.json()["error"]["code"] == "schedule.mcp.unauthenticated"
        approver = Approver()
        async with client_session(url, served.reader, approver) as session:
            args = {
                "title": "x",
                "instruction": "y",
                "at": world.later(days=1),
                "idempotency_key": "mcp-3",
            }
            denied = await session.call_tool("schedule.create", args)
            assert denied.isError
            assert payload(denied)["error"]["code"] == "schedule.auth.scope_required"
            listed = await session.call_tool("schedule.list", {})
            assert not listed.isError
        assert approver.messages == []
        assert (await world.counts())["tool_approval_requests"] == 0
        assert (await world.counts())["schedules"] == 0


async def test_a_token_revoked_in_the_file_stops_at_the_next_request(pg_url: str) -> None:
    async with serving(pg_url) as served:
        async with client_session(served.url, served.owner, Approver()) as session:
            listed = await session.call_tool("schedule.list", {})
            assert not listed.isError
        revoke_token(served.tokens, served.owner_id)
        async with httpx.AsyncClient() as client:
            response = await client.post(
                served.url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": f"Bearer {served.owner}"},
            )
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "schedule.mcp.unauthenticated"
        with pytest.raises(BaseExceptionGroup):  # the SDK client meets the 401 at initialize
            async with client_session(served.url, served.owner, Approver()):
                pass
        # The reader's token is still in the file: only the revoked one stopped.
        async with client_session(served.url, served.reader, Approver()) as session:
            assert not (await session.call_tool("schedule.list", {})).isError
