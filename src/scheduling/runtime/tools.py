"""The minimal tool pipeline: a ToolSpec registry, the exact-scope check, and output
byte ceilings.

A run may invoke a tool only when the tool is registered, the run's agent version
declares it, and every scope the tool requires is in the run's snapshot of
``requested_scopes`` (exact names, no hierarchy). What the principal holds besides
that snapshot never matters: the snapshot is the run's whole authority. Outputs are
cut to the tool's byte ceiling on a UTF-8 boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.runtime import ToolCall

TOOL_UNKNOWN = reason("schedule.tool.unknown", "The tool is not in the tool registry")
TOOL_UNDECLARED = reason(
    "schedule.tool.undeclared", "The run's agent version does not declare the tool"
)
TOOL_SCOPE_DENIED = reason(
    "schedule.tool.scope_denied", "A scope the tool requires is not in the run's scope snapshot"
)
TOOL_INVALID_SPEC = reason(
    "schedule.tool.invalid_spec", "A ToolSpec has an empty name or a non-positive byte ceiling"
)

ToolHandler = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class ToolSpec:
    """A registered tool: the exact scopes it needs and its output byte ceiling."""

    name: str
    required_scopes: frozenset[str]
    output_byte_ceiling: int
    handler: ToolHandler

    def __post_init__(self) -> None:
        if not self.name.strip() or self.output_byte_ceiling <= 0:
            raise ValidationError(TOOL_INVALID_SPEC, "a tool needs a name and a positive ceiling")


@dataclass(frozen=True)
class ToolDecision:
    """The pipeline's verdict for one call; ``reason_code`` is set when denied."""

    tool: str
    allowed: bool
    reason_code: str | None = None
    missing_scopes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ToolOutput:
    """A tool's output after the ceiling: ``truncated`` when bytes were cut."""

    text: str
    original_bytes: int
    truncated: bool


def cut_to_bytes(text: str, ceiling: int) -> tuple[str, int, bool]:
    """``text`` cut to at most ``ceiling`` UTF-8 bytes without splitting a character."""
    data = text.encode("utf-8")
    if len(data) <= ceiling:
        return text, len(data), False
    return data[:ceiling].decode("utf-8", errors="ignore"), len(data), True


class ToolRegistry:
    """Tool specs by name."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: ToolSpec) -> None:
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)


def declared_tools(agent_spec: Mapping[str, Any]) -> frozenset[str]:
    """The tool names an AgentSpec declares (``spec["tools"]``: names or {"name": ...})."""
    names: set[str] = set()
    for item in agent_spec.get("tools", ()) or ():
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
            names.add(item["name"])
    return frozenset(names)


class ToolPipeline:
    """Check, then invoke. The check runs before anything else (approval, dispatch)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def check(
        self, call: ToolCall, run_scopes: frozenset[str], agent_spec: Mapping[str, Any]
    ) -> ToolDecision:
        spec = self.registry.get(call.name)
        if spec is None:
            return ToolDecision(call.name, False, TOOL_UNKNOWN)
        if call.name not in declared_tools(agent_spec):
            return ToolDecision(call.name, False, TOOL_UNDECLARED)
        missing = spec.required_scopes - run_scopes
        if missing:
            return ToolDecision(call.name, False, TOOL_SCOPE_DENIED, frozenset(missing))
        return ToolDecision(call.name, True)

    def invoke(self, call: ToolCall) -> ToolOutput:
        """Run an allowed call's handler and apply the ceiling (call ``check`` first)."""
        spec = self.registry.get(call.name)
        if spec is None:
            raise ValidationError(TOOL_UNKNOWN, "the tool is not registered", {"tool": call.name})
        text, size, truncated = cut_to_bytes(spec.handler(call.arguments), spec.output_byte_ceiling)
        return ToolOutput(text=text, original_bytes=size, truncated=truncated)


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
            ToolSpec("web.search", frozenset({"web.search"}), 4096, search),
            ToolSpec("memory.recall", frozenset({"memory.read"}), 4096, recall),
            ToolSpec("bulk.output", frozenset(), 1024, bulk),
        ]
    )
