"""``rule.text.hygiene`` at the MCP edge, on both transports (ADR 2112).

A model tool call's arguments and call key reach the pipeline's one text validator
from stdio (``McpEdge.serve_stdio`` over two OS pipes) and from streamable HTTP alike:
an invalid UTF-8 byte, which no client library sends and which the world's clients
therefore plant on the wire, is ``schedule.text.invalid``, never read as U+FFFD and
stored; a NUL in the call key too; nothing is asked and nothing written (see
``mcp_support.mcp_text_check``).
"""

from __future__ import annotations

import pytest

from gates.checks.mcp_support import McpWorld, mcp_text_check
from gates.runner.pytest_plugin import GateEvidence


@pytest.mark.postgres
@pytest.mark.rule("rule.text.hygiene")
async def test_mcp_bad_text_is_refused_on_both_transports(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world:
        problems, evidence = await mcp_text_check(world)
    assert problems == [], problems
    for key, value in evidence.items():
        gate_evidence.record(key, value)
