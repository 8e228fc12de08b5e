"""``rule.text.hygiene`` ("It is never logged") at the MCP edge's SDK logs (ADR 2112).

A ``tools/call`` whose JSON-RPC id is null or a float is not a request the SDK's session
can validate: it takes it for a notification, answers 202 and logs a warning on the root
logger with the message (or pydantic's error quoting it). Sent over streamable HTTP
with an instruction and a title that are markers, such a call writes nothing, and no
log record of the process, at any level, holds either marker: the warning keeps only
its first words.

Tests of the test: ``scheduling-gates mutate`` (``mcp.sdk_message_kept_whole``,
``mcp.sdk_filter_on_sdk_logger``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from gates.checks.mcp_support import OWNER, McpWorld
from gates.runner.pytest_plugin import GateEvidence

INSTRUCTION = "Otter-marker-instruction-5521"
TITLE = "Heron-marker-title-7730"


async def raw_session(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    """``initialize`` and ``notifications/initialized`` by hand: the session's headers."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    first = await client.post(url, content=json.dumps(init))
    assert first.status_code == 200, first.text
    session = {
        "mcp-session-id": first.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-06-18",
    }
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await client.post(url, content=json.dumps(note), headers=session)
    return session


@pytest.mark.postgres
@pytest.mark.rule("rule.text.hygiene")
async def test_an_unvalidated_call_is_never_logged_whole(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    arguments = {"title": TITLE, "instruction": INSTRUCTION, "idempotency_key": "sdk-log"}
    call = {"name": "schedule.create", "arguments": arguments}
    answers: dict[str, Any] = {}
    async with McpWorld.serving(pg_url) as world:
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {world.bearer[OWNER]}",
        }
        async with httpx.AsyncClient(timeout=30, headers=headers) as client:
            session = await raw_session(client, world.url)
            for name, ident in (("null id", None), ("float id", 1.5)):
                message = {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": call}
                sent = await client.post(world.url, content=json.dumps(message), headers=session)
                answers[name] = sent.status_code
        written = await world.schedules()
    assert written == [], written
    lines = [r.getMessage() for r in caplog.records]
    lines += [caplog.text]
    # The SDK did see and log the calls (the check is not vacuous).
    assert any("Failed to validate" in line for line in lines), lines
    leaked = [line for line in lines if INSTRUCTION in line or TITLE in line]
    assert leaked == [], leaked
    gate_evidence.record("answers", answers)
