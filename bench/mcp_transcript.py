"""``.venv/bin/python bench/mcp_transcript.py``: a real MCP client session, printed.

A throwaway PostgreSQL from the project's provider (``SCHEDULING_DATABASE_URL`` or a
local cluster), migrated to head; principals, the default agent and a token file
(``scheduling tokens add``) from ``gates.checks.mcp_support.McpWorld``; then the
operator command ``scheduling mcp --transport http`` in a subprocess, with the same
settings as ``scheduling serve``, and the ``mcp`` package's own client
(``streamable_http_client`` + ``ClientSession`` with an elicitation callback) doing:
list, create with approval, a declined create, pause with approval, an unknown token.
The database is read between steps. Output: Markdown (docs/operations/mcp-transcript.md
is one run of it).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from gates.checks.mcp_support import OWNER, McpWorld
from gates.checks.tool_support import tool_env
from scheduling.testing import SystemClock
from simulation.provider import acquire_server
from simulation.provider.templates import migrated_template
from simulation.worlds.service import AGENT_ID

SCHEDULING = str(Path(sys.executable).parent / "scheduling")


def say(text: str = "") -> None:
    print(text, flush=True)


def block(value: Any) -> None:
    say("```json")
    say(json.dumps(value, indent=2, ensure_ascii=False, default=str))
    say("```")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def rows(world: McpWorld) -> list[dict[str, Any]]:
    found = await world.schedules()
    return [
        {"title": r["title"], "state": r["state"], "revision": r["current_revision"]} for r in found
    ]


async def transcript(url: str) -> None:
    async with McpWorld.serving(url) as world:  # seeds, issues tokens (its own edge unused)
        port = free_port()
        env = {
            **os.environ,
            **tool_env(url),
            "AGENT_SCHEDULE_API_TOKENS_FILE": str(world.tokens),
            "AGENT_SCHEDULE_MCP_AGENT_ID": str(AGENT_ID),
        }
        argv = [SCHEDULING, "mcp", "--transport", "http", "--port", str(port)]
        say(f"$ scheduling mcp --transport http --port {port}   # development settings, PostgreSQL")
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        assert proc.stdout is not None
        assert proc.stderr is not None
        say("    " + (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().strip())
        endpoint = f"http://127.0.0.1:{port}/mcp/"
        try:
            await client_session(world, endpoint)
        finally:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 30)
        stderr = (await proc.stderr.read()).decode()
        say()
        say(f"Server exit status {proc.returncode}; tracebacks in its stderr: "
            f"{stderr.count('Traceback')}; the bearer token in its stderr: "
            f"{world.bearer[OWNER] in stderr}.")  # fmt: skip


async def client_session(world: McpWorld, endpoint: str) -> None:
    answers = iter(
        [
            types.ElicitResult(action="accept", content={"approve": True}),
            types.ElicitResult(action="decline"),
            types.ElicitResult(action="accept", content={"approve": True}),
        ]
    )

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        answer = next(answers)
        say()
        say("**elicitation/create** (server to client), schedules in the database meanwhile: "
            f"`{await rows(world)}`")  # fmt: skip
        block(json.loads(params.message))
        say(f"client answers: `{answer.model_dump(exclude_none=True)}`")
        say()
        return answer

    tomorrow = (SystemClock().now() + timedelta(days=1)).replace(microsecond=0)
    headers = {"Authorization": f"Bearer {world.bearer[OWNER]}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(endpoint, http_client=http) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        init = await session.initialize()
        say()
        say(f"## Session as `{OWNER.tenant_id}/{OWNER.principal_id}` (bearer from the token file)")
        say()
        say(f"initialize: server `{init.serverInfo.name}`, protocol `{init.protocolVersion}`")
        say()
        listed = await session.list_tools()
        say("### tools/list")
        say()
        for tool in listed.tools:
            required = tool.inputSchema.get("required", [])
            say(f"- `{tool.name}` (required: {', '.join(required) or 'none'})")
        say()
        steps: list[tuple[str, str, dict[str, Any]]] = [
            (
                "create, approved",
                "schedule.create",
                {
                    "title": "Water the plants",
                    "instruction": "Remind me to water the plants.",
                    "at": tomorrow.isoformat(),
                    "idempotency_key": "transcript-1",
                },
            ),
            (
                "create, declined",
                "schedule.create",
                {
                    "title": "Call the bank",
                    "instruction": "Remind me to call the bank.",
                    "at": (tomorrow + timedelta(hours=1)).isoformat(),
                    "idempotency_key": "transcript-2",
                },
            ),
        ]
        created: str | None = None
        for label, tool, args in steps:
            created = await call(session, world, label, tool, args) or created
        await call(session, world, "list", "schedule.list", {})
        assert created is not None
        await call(
            session,
            world,
            "pause, approved",
            "schedule.pause",
            {"schedule_id": created, "expected_revision": 1, "idempotency_key": "transcript-3"},
        )
    say("### An unknown bearer token")
    say()
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            endpoint,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "Authorization": "Bearer sch_0000000000000000_unknown",
                "Accept": "application/json, text/event-stream",
            },
        )
    say(f"HTTP {response.status_code} `{response.text}`")


async def call(
    session: ClientSession, world: McpWorld, label: str, tool: str, args: dict[str, Any]
) -> str | None:
    say(f"### tools/call `{tool}`: {label}")
    say()
    block(args)
    result = await session.call_tool(tool, args)
    block_text = result.content[0]
    assert isinstance(block_text, types.TextContent)
    meta = (result.meta or {}).get("scheduling/result")
    say(f"result (isError={result.isError}, {len(block_text.text.encode())} bytes of text, "
        f"_meta `{meta}`):")  # fmt: skip
    out = json.loads(block_text.text)
    block(out)
    say(f"schedules in the database now: `{await rows(world)}`")
    say()
    return None if result.isError else out.get("schedule_id")


def main() -> int:
    server = acquire_server()
    try:
        url = server.create_database(template=migrated_template(server))
        say("# A real MCP client session against PostgreSQL")
        say()
        say("Produced by `.venv/bin/python bench/mcp_transcript.py` (the `mcp` SDK's own")
        say("client over streamable HTTP, the server `scheduling mcp` in a subprocess).")
        say()
        asyncio.run(transcript(url))
        server.drop_database(url)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
