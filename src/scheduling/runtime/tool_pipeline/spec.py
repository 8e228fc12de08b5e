"""A tool's declaration: its name, version, classification and closed input schema.

A ``ToolSpec`` is data only (what the registry advertises, the roster lists, the
approval policy reads and the gates compare with the spec's tables); the code that
runs an approved call is the tool's *handler* (``registry.RegisteredTool``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason

TOOL_INVALID_SPEC = reason(
    "schedule.tool.invalid_spec",
    "A ToolSpec has an empty name or version, a non-positive bound or an open input schema",
)

_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")


class ToolKind(StrEnum):
    CAPABILITY = "capability"


class ToolSource(StrEnum):
    BUILTIN = "builtin"


class TargetKind(StrEnum):
    IN_PROCESS = "in_process"


class SideEffect(StrEnum):
    NONE = "none"
    EXTERNAL_WRITE = "external_write"
    EXTERNAL_DELETE = "external_delete"


class Risk(StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Idempotency(StrEnum):
    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    CONDITIONALLY_IDEMPOTENT = "conditionally_idempotent"
    NON_IDEMPOTENT = "non_idempotent"


class OutputTrust(StrEnum):
    INTERNAL_TOOL = "internal_tool"
    UNTRUSTED = "untrusted"


def open_objects(schema: Any, path: str = "$") -> list[str]:
    """Paths of every object schema in ``schema`` that admits unknown properties."""
    found: list[str] = []
    if isinstance(schema, Mapping):
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
            found.append(path)
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    found += open_objects(sub, f"{path}.{key}.{name}")
            elif key in ("items", "not", "if", "then", "else"):
                found += open_objects(value, f"{path}.{key}")
            elif key in ("oneOf", "anyOf", "allOf", "prefixItems"):
                for index, sub in enumerate(value):
                    found += open_objects(sub, f"{path}.{key}[{index}]")
    return found


@dataclass(frozen=True)
class ToolSpec:
    """One tool version's classification (the spec's field names) and closed schema."""

    name: str
    version: str
    kind: ToolKind
    source: ToolSource
    target_kind: TargetKind
    side_effect: SideEffect
    risk: Risk
    idempotency: Idempotency
    required_scopes: frozenset[str]
    timeout_seconds: float
    maximum_output_bytes: int
    allow_parallel: bool
    output_trust: OutputTrust
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        problems = []
        if not self.name.strip():
            problems.append("name")
        if not _VERSION.match(self.version):
            problems.append("version")
        if self.maximum_output_bytes <= 0 or self.timeout_seconds <= 0:
            problems.append("bounds")
        if self.input_schema.get("type") != "object":
            problems.append("input_schema is not an object schema")
        problems += [f"open object at {path}" for path in open_objects(self.input_schema)]
        if problems:
            raise ValidationError(TOOL_INVALID_SPEC, "invalid tool spec", {"problems": problems})

    @property
    def version_key(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.version.split("."))

    def classification(self) -> dict[str, Any]:
        """The spec's classification block, field by field (what the gates compare)."""
        return {
            "name": self.name,
            "kind": self.kind.value,
            "source": self.source.value,
            "target_kind": self.target_kind.value,
            "side_effect": self.side_effect.value,
            "risk": self.risk.value,
            "idempotency": self.idempotency.value,
            "required_scopes": sorted(self.required_scopes),
            "timeout_seconds": self.timeout_seconds,
            "maximum_output_bytes": self.maximum_output_bytes,
            "allow_parallel": self.allow_parallel,
            "output_trust": self.output_trust.value,
        }
