"""Text hygiene at the boundary: the one validator for every free text the product stores.

PostgreSQL cannot store NUL in ``text`` or ``jsonb`` (SQLSTATE 22P05, and its log then
quotes the surrounding JSON), and a lone surrogate cannot be encoded as UTF-8 (the
content hash would raise). Both are refused here, before any hashing, scanning or SQL,
with one stable code, so every edge (HTTP, model tools, MCP, CLI) answers the same
argument failure and nothing reaches a row or a log.

The error names the field and the first offending position, never the value: the
text may be an instruction (never logged) or a pasted credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason

TEXT_INVALID = reason(
    "schedule.text.invalid",
    "A text value holds a NUL character or a lone UTF-16 surrogate, which cannot be stored",
)

_SURROGATES = range(0xD800, 0xE000)


def text_problem(value: str) -> tuple[int, str] | None:
    """The first offending (position, kind) in ``value``: ``nul`` or ``lone_surrogate``."""
    for position, char in enumerate(value):
        code = ord(char)
        if code == 0:
            return position, "nul"
        if code in _SURROGATES:
            return position, "lone_surrogate"
    return None


def check_text(field: str, value: str) -> str:
    """``value`` unchanged, or ``schedule.text.invalid`` naming ``field`` (never the value)."""
    # Fast path: the common case has neither, and ``in`` on str is C speed.
    if "\x00" not in value and value.isascii():
        return value
    problem = text_problem(value)
    if problem is None:
        return value
    position, kind = problem
    raise ValidationError(
        TEXT_INVALID,
        f"{field} holds a character that cannot be stored ({kind})",
        {"field": field, "position": position, "problem": kind},
    )


def check_tree(field: str, value: Any) -> Any:
    """``check_text`` over every string in a JSON-shaped value (keys included); the
    reported field is a JSON path under ``field`` such as ``cadence.timezone``."""
    if isinstance(value, str):
        check_text(field, value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{field}.{check_text(field, key) if isinstance(key, str) else key}"
            check_tree(name, item)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_tree(f"{field}[{index}]", item)
    return value
