"""``scheduling mcp --transport stdio`` as a subprocess, against PostgreSQL.

The world (principals, agent, token file issued with ``scheduling tokens add``) is
``McpWorld``'s; the process gets the same settings as ``scheduling serve`` plus the
caller's bearer token in ``AGENT_SCHEDULE_MCP_TOKEN``. The SDK's stdio client lists,
creates with an elicited approval, is declined, pauses; raw lines show bad text and
deep nesting over stdio and a client that leaves mid-call (stdin closed) ends the
process quietly.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gates.checks.mcp_support import OWNER, Elicitations, McpWorld, accept, code, payload, reminder
from gates.checks.tool_support import tool_env
from scheduling.adapters.system_clock import SystemClock
from simulation.worlds.service import AGENT_ID

pytestmark = pytest.mark.postgres
SCHEDULING = str(Path(sys.executable).parent / "scheduling")


def tomorrow(world: McpWorld, title: str, key: str) -> dict[str, Any]:
    """A reminder a day after the real now: the subprocess runs on the system clock."""
    at = (SystemClock().now() + timedelta(days=1)).isoformat()
    return {**reminder(world, title, key), "at": at}


def stdio_env(world: McpWorld, url: str, token: str) -> dict[str, str]:
    return {
        **os.environ,
        **tool_env(url),
        "AGENT_SCHEDULE_API_TOKENS_FILE": str(world.tokens),
        "AGENT_SCHEDULE_MCP_TOKEN": token,
        "AGENT_SCHEDULE_MCP_AGENT_ID": str(AGENT_ID),
    }


async def test_the_sdk_stdio_client_lists_creates_declines_and_pauses(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        env = stdio_env(world, pg_url, world.bearer[OWNER])
        params = StdioServerParameters(command=SCHEDULING, args=["mcp"], env=env)
        seen_rows: list[int] = []

        async def look_then(answer: types.ElicitResult) -> Any:
            async def run(p: types.ElicitRequestParams) -> types.ElicitResult:
                seen_rows.append(len(await world.schedules()))
                return answer

            return run

        asks = Elicitations(
            [
                await look_then(accept(True)),
                await look_then(types.ElicitResult(action="decline")),
                await look_then(accept(True)),
            ]
        )
        with tempfile.TemporaryFile("w+") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, elicitation_callback=asks) as session,
            ):
                await session.initialize()
                names = sorted(t.name for t in (await session.list_tools()).tools)
                assert len(names) == 6
                made = await session.call_tool("schedule.create", tomorrow(world, "A", "s-1"))
                assert not made.isError, payload(made)
                declined = await session.call_tool("schedule.create", tomorrow(world, "B", "s-2"))
                assert code(declined) == "schedule.tool.approval_denied"
                target = payload(made)["schedule_id"]
                paused = await session.call_tool(
                    "schedule.pause",
                    {"schedule_id": target, "expected_revision": 1, "idempotency_key": "s-3"},
                )
                assert not paused.isError, payload(paused)
            errlog.seek(0)
            stderr = errlog.read()
        assert seen_rows == [0, 1, 1]  # no row before an answer; none after the decline
        rows = await world.schedules()
        assert [(r["title"], r["state"]) for r in rows] == [("A", "PAUSED")]
        assert "serving MCP on stdio" in stderr
        assert "Traceback" not in stderr
        assert world.bearer[OWNER] not in stderr


async def test_raw_lines_bad_text_and_a_client_gone_mid_call(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        env = stdio_env(world, pg_url, world.bearer[OWNER])
        proc = await asyncio.create_subprocess_exec(
            SCHEDULING,
            "mcp",
            "--transport",
            "stdio",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None

        async def send(line: bytes) -> None:
            assert proc.stdin is not None
            proc.stdin.write(line + b"\n")
            await proc.stdin.drain()

        async def receive() -> dict[str, Any]:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            return dict(json.loads(line))

        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        await send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).encode()
        )
        assert (await receive())["id"] == 1
        await send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await send(b"this is not json")
        await send(b'{"jsonrpc":"2.0","id":9,"method":7}')  # not a JSON-RPC message
        assert (await receive()) == {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {"code": -32600, "message": "Invalid request"},
        }
        args = json.dumps(tomorrow(world, "x", "raw-1"))
        for n, bad in enumerate((b'"nul\\u0000"', b'"lone\\ud800"', b'"byte\xff"'), start=2):
            arguments = args.encode().replace(b'"x"', bad, 1)
            call = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":' % n
            await send(call + b'{"name":"schedule.create","arguments":' + arguments + b"}}")
            answer = await receive()
            assert answer["id"] == n
            text = json.loads(answer["result"]["content"][0]["text"])
            assert text["error"]["code"] == "schedule.text.invalid", text
        # Nested past the JSON parser's own limit: dropped like any line that is not
        # JSON, and the session lives on; nested past the edges' bound (ADR 2780): the
        # stable code, not a traceback.
        await send(b"[" * 5000 + b"]" * 5000)
        deep = args.encode().replace(b'"x"', b"[" * 200 + b"1" + b"]" * 200, 1)
        call = b'{"jsonrpc":"2.0","id":6,"method":"tools/call","params":'
        await send(call + b'{"name":"schedule.create","arguments":' + deep + b"}}")
        answer = await receive()
        assert answer["id"] == 6, answer
        assert "result" in answer, answer
        text = json.loads(answer["result"]["content"][0]["text"])
        assert text["error"]["code"] == "schedule.text.too_deep", text
        # Deeper still, the SDK's own request validation answers first: an error, not
        # a crash (the process still serves the call below and ends quietly).
        deeper = args.encode().replace(b'"x"', b"[" * 900 + b"1" + b"]" * 900, 1)
        call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":'
        await send(call + b'{"name":"schedule.create","arguments":' + deeper + b"}}")
        answer = await receive()
        assert answer["id"] == 7, answer
        if "result" in answer:
            text = json.loads(answer["result"]["content"][0]["text"])
            assert text["error"]["code"] == "schedule.text.too_deep", text
        else:
            assert answer["error"]["code"] == types.INVALID_PARAMS, answer
        # A call whose approval is asked; the client then leaves without answering.
        create = {"name": "schedule.create", "arguments": tomorrow(world, "Gone", "raw-2")}
        await send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": create}
            ).encode()
        )
        asked = await receive()
        assert asked["method"] == "elicitation/create"
        proc.stdin.close()
        status = await asyncio.wait_for(proc.wait(), 60)
        stderr = (await proc.stderr.read()).decode()
        assert status == 0, stderr
        assert "Traceback" not in stderr
        assert "nul" not in stderr
        assert "lone" not in stderr
        assert await world.schedules() == []


async def test_startup_refuses_an_unknown_token_and_the_flags_off(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        unknown = stdio_env(world, pg_url, "sch_0000000000000000_nope")
        proc = await asyncio.create_subprocess_exec(
            SCHEDULING, "mcp", env=unknown, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 1
        assert out == b""
        assert "schedule.mcp.unauthenticated" in err.decode()
        assert "sch_0000000000000000_nope" not in err.decode()
        off = {
            **stdio_env(world, pg_url, world.bearer[OWNER]),
            "AGENT_SCHEDULE_WORKER_ENABLED": "0",
        }
        for transport in ("stdio", "http"):
            proc = await asyncio.create_subprocess_exec(
                SCHEDULING, "mcp", "--transport", transport, "--port", "0", env=off,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await proc.communicate()
            assert proc.returncode == 1, err
            assert "schedule.bootstrap.feature_disabled" in err.decode()
            assert "Traceback" not in err.decode()


async def test_a_client_that_stops_reading_ends_the_process_quietly(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        env = stdio_env(world, pg_url, world.bearer[OWNER])
        read_end, write_end = os.pipe()
        proc = await asyncio.create_subprocess_exec(
            SCHEDULING, "mcp", env=env, stdin=asyncio.subprocess.PIPE, stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        os.close(write_end)
        os.close(read_end)  # nobody reads the answers: every write fails with EPIPE
        assert proc.stdin is not None
        assert proc.stderr is not None
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        proc.stdin.write(line.encode() + b"\n")
        await proc.stdin.drain()
        status = await asyncio.wait_for(proc.wait(), 60)
        stderr = (await proc.stderr.read()).decode()
        assert status == 0, stderr
        assert "Traceback" not in stderr
        assert "client closed stdout" in stderr
