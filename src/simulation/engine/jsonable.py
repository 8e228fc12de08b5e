"""Turn simulator values into canonical JSON (the form traces are compared in)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import Enum
from typing import Any
from uuid import UUID

from scheduling.domain.canonical import canonical_json


def to_jsonable(value: Any) -> Any:
    """A JSON-compatible copy: UUIDs and enums as strings, instants as UTC ISO text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Enum):
        return to_jsonable(value.value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.isoformat()
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((to_jsonable(v) for v in value), key=canonical_json)
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return repr(value)


def dumps(value: Any) -> str:
    """Canonical, stable text: sorted keys, no insignificant whitespace."""
    return canonical_json(to_jsonable(value))
