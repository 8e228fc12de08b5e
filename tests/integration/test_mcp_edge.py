"""The MCP edge driven by the SDK's own client over streamable HTTP on loopback.

The edge is built by ``bootstrap.build_mcp`` over PostgreSQL and a token file issued
with ``scheduling tokens add`` (``gates.checks.mcp_support.McpWorld``). What the gate
facet (src/gates/checks/test_model_mcp.py) does not: replay, the result bytes at the
page ceiling (defect 5), bad text (defect 7 at this edge), revocation, a disconnect
mid-call without a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from mcp import types

from gates.checks.mcp_support import (
    OWNER,
    READER,
    Elicitations,
    McpWorld,
    accept,
    code,
    payload,
    reminder,
    text_bytes,
)
from scheduling.adapters.token_file import read_entries, revoke_token
from scheduling.mcp import RESULT_META
from scheduling.runtime.tool_pipeline import output_bytes
from simulation.worlds.service import definition

pytestmark = pytest.mark.postgres
CEILING = 524_288
WIDE = "\u0001"  # JSON escapes it to six bytes (\u0001)
ALL_DATES = [
    {"month": m, "day": d}
    for m in range(1, 13)
    for d in range(1, 32)
    if d <= (29 if m == 2 else 30 if m in (4, 6, 9, 11) else 31)
]


def meta(result: types.CallToolResult) -> dict[str, Any]:
    assert result.meta is not None
    return dict(result.meta[RESULT_META])


async def test_create_replays_and_the_result_is_the_output_alone(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        asks = Elicitations([lambda p: _accepting()])
        async with world.session(OWNER, asks) as session:
            listed = await session.list_tools()
            create = next(t for t in listed.tools if t.name == "schedule.create")
            assert "idempotency_key" in create.inputSchema["required"]
            assert create.inputSchema["additionalProperties"] is False
            args = reminder(world, "Stretch", "mcp-1")
            made = await session.call_tool("schedule.create", args)
            assert not made.isError, payload(made)
            out = payload(made)
            assert set(out) >= {"schedule_id", "state", "next_fire_at"}
            assert made.structuredContent is None  # one copy of the output (ADR 2111)
            assert meta(made)["status"] == "succeeded"
            assert meta(made)["replayed"] is False
            again = await session.call_tool("schedule.create", args)
            assert payload(again)["schedule_id"] == out["schedule_id"]
            assert meta(again)["replayed"] is True
            assert len(asks.seen) == 1  # a replay asks nothing
            assert asks.seen[0]["view"]["title"] == "Stretch"
            bad = await session.call_tool("schedule.list", {"limit": 99})
            assert bad.isError
            assert code(bad) == "schedule.tool.invalid_arguments"
            not_a_key = await session.call_tool("schedule.create", {**args, "idempotency_key": 7})
            assert code(not_a_key) == "schedule.tool.invalid_arguments"
            unknown = await session.call_tool("schedule.nope", {})
            assert code(unknown) == "schedule.tool.undeclared"
        assert len(await world.schedules()) == 1


async def test_a_page_at_the_ceiling_reaches_the_model_in_the_measured_bytes(
    pg_url: str,
) -> None:
    """Defect 5: fifty legal summaries, each with the largest yearly selector and a
    200-character title of six-byte escapes: the text the client receives is the
    compact output the pipeline measured (under 524,288 bytes); the edge's former
    default separators would have sent more than the ceiling."""
    yearly = {
        "kind": "YEARLY",
        "local_time": "23:59:59",
        "timezone": "America/North_Dakota/New_Salem",
        "dates": ALL_DATES,
    }
    async with McpWorld.serving(pg_url) as world:
        service = world.role.tools.service
        assert service is not None
        for i in range(50):
            title = f"{i:03d} " + WIDE * 196
            made = definition(title=title, instruction=f"item {i}", cadence=yearly)
            await service.create(OWNER, f"seed-{i}", made)
            world.clock.advance(1)
        async with world.session(OWNER, Elicitations()) as session:
            page = await session.call_tool("schedule.list", {"limit": 50})
        assert not page.isError, payload(page)
        listed = payload(page)
        assert len(listed["items"]) == 50
        size = text_bytes(page)
        assert size == output_bytes(listed)
        assert size <= CEILING
        assert size > 400_000  # the page is near the ceiling, as the defect's was
        assert len(json.dumps(listed, ensure_ascii=False).encode()) > CEILING


@pytest.mark.parametrize(
    ("title", "problem"),
    [("nul\x00byte", "nul"), ("lone\ud800surrogate", "lone_surrogate")],
)
async def test_bad_text_is_the_stable_argument_failure(
    pg_url: str, title: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 7 at this edge: a NUL or a lone surrogate (sent as the JSON escape, which
    the SDK's client cannot even encode) comes back as ``schedule.text.invalid``, never
    reaches an approval or a row, and no log line carries it."""
    caplog.set_level(logging.DEBUG)
    async with McpWorld.serving(pg_url) as world:
        asks = Elicitations([lambda p: _accepting()])
        if problem == "nul":  # the SDK's client cannot encode a lone surrogate at all
            async with world.session(OWNER, asks) as session:
                for field in ("title", "idempotency_key"):
                    args = {**reminder(world, "Fine", "k-1"), field: title}
                    result = await session.call_tool("schedule.create", args)
                    assert code(result) == "schedule.text.invalid", payload(result)
                    assert payload(result)["error"]["details"]["problem"] == problem
        # The escape on the wire, by hand, in a text argument and in the key.
        for field in ("title", "idempotency_key"):
            raw = await _raw_call(world, {field: title})
            assert raw["error"]["code"] == "schedule.text.invalid", raw
            assert raw["error"]["details"]["problem"] == problem
        # Bytes that are not UTF-8 at all: the validator sees a lone surrogate.
        raw = await _raw_call(world, {"title": "BYTE"}, (b"BYTE", b"byte\xff"))
        assert raw["error"]["code"] == "schedule.text.invalid", raw
        assert raw["error"]["details"]["problem"] == "lone_surrogate"
        assert asks.seen == []
        assert await world.schedules() == []
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "nul\x00byte" not in logged
    assert title not in logged
    assert "Traceback" not in caplog.text


async def test_a_token_revoked_in_the_file_stops_at_the_next_request(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        async with world.session(OWNER) as session:
            assert not (await session.call_tool("schedule.list", {})).isError
        owner_id = next(
            e.token_id for e in read_entries(world.tokens) if e.principal_id == OWNER.principal_id
        )
        revoke_token(world.tokens, owner_id)
        response = await world.post(
            {"jsonrpc": "2.0", "id": 1, "method": "ping"}, world.bearer[OWNER]
        )
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "schedule.mcp.unauthenticated"
        with pytest.raises(BaseExceptionGroup):  # the SDK client meets the 401 at initialize
            async with world.session(OWNER):
                pass
        async with world.session(READER) as session:  # only the revoked token stopped
            assert not (await session.call_tool("schedule.list", {})).isError


async def test_a_client_gone_mid_call_logs_no_traceback(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The client leaves while its approval is asked (session deleted, streams closed),
    then another while a call runs: no record carries a traceback, nothing persisted,
    and the server still serves the next client."""
    caplog.set_level(logging.INFO)
    async with McpWorld.serving(pg_url) as world:
        asked = asyncio.Event()

        async def hang(params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.set()
            await asyncio.sleep(3600)
            return accept(True)

        async def leaving_client() -> None:
            async with world.session(OWNER, Elicitations([hang])) as session:
                await session.call_tool("schedule.create", reminder(world, "Gone", "g-1"))

        task = asyncio.create_task(leaving_client())
        await asyncio.wait_for(asked.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)
        async with world.session(OWNER, Elicitations([lambda p: _accepting()])) as session:
            made = await session.call_tool("schedule.create", reminder(world, "Next", "g-2"))
        assert not made.isError, payload(made)
        titles = [r["title"] for r in await world.schedules()]
        assert titles == ["Next"]
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert tracebacks == [], [(r.name, r.getMessage()) for r in tracebacks]


async def _raw_session(
    client: httpx.AsyncClient, world: McpWorld, capabilities: dict[str, Any]
) -> dict[str, str]:
    """initialize and initialized by hand; the session's headers for what follows."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    first = await client.post(world.url, content=json.dumps(init))
    session = {
        "mcp-session-id": first.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await client.post(world.url, content=json.dumps(note), headers=session)
    return session


async def _raw_call(
    world: McpWorld, override: dict[str, str], raw: tuple[bytes, bytes] | None = None
) -> dict[str, Any]:
    """initialize, initialized, tools/call by hand (JSON with the escape as sent)."""
    headers = {
        "Authorization": f"Bearer {world.bearer[OWNER]}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        headers = await _raw_session(client, world, {"elicitation": {}})
        args = {**reminder(world, "x", "raw-1"), **override}
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        body = json.dumps({**call, "params": {"name": "schedule.create", "arguments": args}})
        data = body.encode() if raw is None else body.encode().replace(*raw)
        response = await client.post(world.url, content=data, headers=headers)
        events = [
            json.loads(line[len("data: ") :])
            for line in response.text.splitlines()
            if line.startswith("data: ")
        ]
        await client.delete(world.url, headers=headers)
    result = next(e["result"] for e in events if e.get("id") == 2)
    return dict(json.loads(result["content"][0]["text"]))


async def _accepting() -> types.ElicitResult:
    return accept(True)


async def test_a_body_over_the_limit_is_refused_with_its_code(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 1_100_000}}
        response = await world.post(big, world.bearer[OWNER])
        assert response.status_code == 413
        assert response.json() == {"error": {"code": "schedule.mcp.body_too_large"}}
        ping = await world.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, world.bearer[OWNER])
        assert ping.status_code != 413


async def test_an_unanswered_approval_is_the_retryable_timeout(pg_url: str) -> None:
    """ADR 2121 over MCP: no answer in time decides nothing; the same key asks again."""
    async with McpWorld.serving(pg_url, approval_timeout_seconds=1) as world:

        async def late(params: types.ElicitRequestParams) -> types.ElicitResult:
            await asyncio.sleep(3)  # answers after the server stopped waiting
            return accept(True)

        asks = Elicitations([late], default=accept(True))
        async with world.session(OWNER, asks) as session:
            args = reminder(world, "Late", "t-1")
            first = await session.call_tool("schedule.create", args)
            assert code(first) == "schedule.tool.approval_timeout", payload(first)
            assert payload(first)["error"]["retryable"] is True
            assert await world.schedules() == []
            assert await world.sql("SELECT * FROM tool_approval_decisions") == []
            again = await session.call_tool("schedule.create", args)
        assert not again.isError, payload(again)
        assert len(asks.seen) == 2
        assert [r["title"] for r in await world.schedules()] == ["Late"]


async def test_bodies_the_sdk_cannot_parse_are_its_parse_error_and_messages_stay_unlogged(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """JSON the SDK's parser raises on (nested past its recursion limit, an integer past
    Python's digit limit) is its 400 parse error, not a 500 with a traceback; a tools
    call whose id is null or a float (taken for a notification) is not validated, and
    the SDK's warning about it never quotes the message (ADR 2780)."""
    caplog.set_level(logging.DEBUG)
    marker = "otter-instruction-marker"
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    async with McpWorld.serving(pg_url) as world:
        headers["Authorization"] = f"Bearer {world.bearer[OWNER]}"
        call = {"name": "schedule.create", "arguments": {"instruction": marker}}
        bodies = {
            "nested": b"[" * 5000 + b"]" * 5000,
            "long integer id": b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}',
            "null id": json.dumps(
                {"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": call}
            ).encode(),
            "float id": json.dumps(
                {"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": call}
            ).encode(),
        }
        answers = {}
        async with httpx.AsyncClient(timeout=30, headers=headers) as client:
            session = await _raw_session(client, world, {})
            for name, content in bodies.items():
                sent = await client.post(world.url, content=content, headers=session)
                answers[name] = sent.status_code
        assert await world.schedules() == []
    assert answers["nested"] == answers["long integer id"] == 400, answers
    assert answers["null id"] == answers["float id"] == 202, answers  # taken for notifications
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Failed to validate notification" in logged  # the SDK did log about them
    assert marker not in logged
    assert "Traceback" not in caplog.text
