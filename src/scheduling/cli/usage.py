"""How the ``scheduling`` CLI words a refusal: one line, the stable code, the bad value.

A user error exits 2 and changes nothing; a refusal from a running system (database
unavailable, startup refused) exits 1. Neither prints a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from scheduling.domain.errors import SchedulingError, ValidationError
from scheduling.domain.reasons import reason

INVALID_JSON = reason(
    "schedule.cli.invalid_json", "A command-line argument that must be JSON is not"
)
INVALID_ARGUMENT = reason(
    "schedule.cli.invalid_argument", "A command-line option is outside its allowed range"
)

EXIT_USAGE = 2
EXIT_REFUSED = 1

# Codes whose message names a field without saying which payload key held the bad value.
_FIELD_OF_CODE = {
    "schedule.cadence.unknown_kind": "kind",
    "schedule.cadence.invalid_local_time": "local_time",
    "schedule.cadence.invalid_timezone": "timezone",
}


def shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc: SchedulingError, payload: Mapping[str, Any] | None = None) -> str:
    """``code: message`` plus the fields named and, when known, the value given."""
    text = f"{exc.code}: {exc.message}"
    fields = exc.details.get("fields")
    if isinstance(fields, list) and fields:
        text += ": " + ", ".join(str(f) for f in fields)
    field = exc.details.get("field") or _FIELD_OF_CODE.get(exc.code)
    if isinstance(field, str) and payload is not None and field in payload:
        text += f" (got {field}={shown(payload[field])})"
    return text


def refuse(prog: str, message: str, code: int = EXIT_USAGE) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def refuse_error(prog: str, exc: SchedulingError, payload: Mapping[str, Any] | None = None) -> int:
    code = EXIT_USAGE if isinstance(exc, ValidationError) else EXIT_REFUSED
    return refuse(prog, describe(exc, payload), code)
