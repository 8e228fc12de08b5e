"""Registered tools: a spec with the handler that runs it, by name and version.

Two handler kinds share the registry. A *run tool* (``text_handler``) is what a
scheduled run's executor calls mid-run: checked against the run's scope snapshot and
cut to its byte ceiling. A *governed tool* (``handler``) is what a conversation's model
proposes: exact-scope check, closed arguments, approval, idempotent durable record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from scheduling.domain.errors import ValidationError
from scheduling.runtime.tool_pipeline.context import PreparedCall, ToolExecutionContext
from scheduling.runtime.tool_pipeline.spec import TOOL_INVALID_SPEC, ToolSpec

TextHandler = Callable[[Mapping[str, Any]], str]
Normalizer = Callable[[Mapping[str, Any]], dict[str, Any]]
"""A governed tool's canonical form of schema-valid arguments (ADR 2102): equal for
arguments that mean the same call, defaults filled; raises the domain's own
``ValidationError`` for a value it cannot read (e.g. a cadence code)."""


class ToolHandler(Protocol):
    """A governed tool's code: validate and build the approval view, then the effect."""

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall: ...


@dataclass(frozen=True)
class RegisteredTool:
    spec: ToolSpec
    handler: ToolHandler | None = None
    text_handler: TextHandler | None = None
    normalize: Normalizer | None = None
    """The ledger hashes, and ``prepare`` receives, ``normalize(arguments)``
    (None: the schema-valid arguments as given)."""

    def __post_init__(self) -> None:
        if (self.handler is None) == (self.text_handler is None):
            raise ValidationError(TOOL_INVALID_SPEC, "a tool has exactly one handler")


class ToolRegistry:
    """Tools by name and version; ``get(name)`` is the newest registered version."""

    def __init__(self, tools: Iterable[RegisteredTool] = ()) -> None:
        self._tools: dict[str, dict[str, RegisteredTool]] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: RegisteredTool) -> None:
        self._tools.setdefault(tool.spec.name, {})[tool.spec.version] = tool

    def get(self, name: str, version: str | None = None) -> RegisteredTool | None:
        versions = self._tools.get(name)
        if not versions:
            return None
        if version is not None:
            return versions.get(version)
        return max(versions.values(), key=lambda tool: tool.spec.version_key)

    def names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def specs(self) -> list[ToolSpec]:
        """The advertised specs: the newest version of each name, sorted by name."""
        return [tool.spec for name in sorted(self._tools) if (tool := self.get(name))]

    def versions(self, name: str) -> list[ToolSpec]:
        return sorted(
            (tool.spec for tool in self._tools.get(name, {}).values()),
            key=lambda spec: spec.version_key,
        )
