"""The run tools of the shipped scripted agent, and the pipeline's names the run worker uses.

The pipeline itself lives in ``scheduling.runtime.tool_pipeline`` (ADR 1600): a *run
tool* here is what a scheduled run's executor calls mid-run (checked against the run's
``requested_scopes`` snapshot: registered, declared by the pinned agent version, every
required scope present, exact names; output cut to the byte ceiling on a UTF-8
boundary). What the principal holds besides that snapshot never matters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.runtime.tool_pipeline import (
    TOOL_INVALID_SPEC,
    TOOL_SCOPE_DENIED,
    TOOL_UNDECLARED,
    TOOL_UNKNOWN,
    Idempotency,
    OutputTrust,
    RegisteredTool,
    Risk,
    SideEffect,
    TargetKind,
    ToolDecision,
    ToolKind,
    ToolOutput,
    ToolPipeline,
    ToolRegistry,
    ToolSource,
    ToolSpec,
    cut_to_bytes,
    declared_tools,
)

__all__ = [
    "TOOL_INVALID_SPEC",
    "TOOL_SCOPE_DENIED",
    "TOOL_UNDECLARED",
    "TOOL_UNKNOWN",
    "ToolDecision",
    "ToolOutput",
    "ToolPipeline",
    "ToolRegistry",
    "ToolSpec",
    "cut_to_bytes",
    "declared_tools",
    "run_tool_spec",
    "scripted_tools",
]

_ANY_ARGUMENTS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "query": {"type": "string"},
        "topic": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
    },
}


def run_tool_spec(name: str, scopes: frozenset[str], ceiling: int) -> ToolSpec:
    """A read-only builtin run tool's spec (the scripted agent's tools are all reads)."""
    return ToolSpec(
        name=name,
        version="1.0.0",
        kind=ToolKind.CAPABILITY,
        source=ToolSource.BUILTIN,
        target_kind=TargetKind.IN_PROCESS,
        side_effect=SideEffect.NONE,
        risk=Risk.LOW,
        idempotency=Idempotency.READ_ONLY,
        required_scopes=scopes,
        timeout_seconds=15,
        maximum_output_bytes=ceiling,
        allow_parallel=True,
        output_trust=OutputTrust.UNTRUSTED,
        input_schema=_ANY_ARGUMENTS,
    )


def scripted_tools() -> ToolRegistry:
    """The deterministic tools the shipped scripted agent can call (no I/O anywhere)."""

    def search(arguments: Mapping[str, Any]) -> str:
        return f"results for {arguments.get('query', '')!s}"

    def recall(arguments: Mapping[str, Any]) -> str:
        return f"memory: {arguments.get('topic', '')!s}"

    def bulk(arguments: Mapping[str, Any]) -> str:
        return "x" * int(arguments.get("size", 0))

    return ToolRegistry(
        [
            RegisteredTool(
                run_tool_spec("web.search", frozenset({"web.search"}), 4096), text_handler=search
            ),
            RegisteredTool(
                run_tool_spec("memory.recall", frozenset({"memory.read"}), 4096),
                text_handler=recall,
            ),
            RegisteredTool(run_tool_spec("bulk.output", frozenset(), 1024), text_handler=bulk),
        ]
    )
