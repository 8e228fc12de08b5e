"""Text hygiene at the boundary: the one validator for every free text the product stores.

PostgreSQL cannot store NUL in ``text`` or ``jsonb`` (SQLSTATE 22P05, and its log then
quotes the surrounding JSON), and a lone surrogate cannot be encoded as UTF-8 (the
content hash would raise). Both are refused here, before any hashing, scanning or SQL,
with one stable code, so every edge (HTTP, model tools, MCP, CLI) answers the same
argument failure and nothing reaches a row or a log.

The error names the field and the first offending position, never the value: the
text may be an instruction (never logged) or a pasted credential. A value nested deeper
than any legal one is refused the same way (``schedule.text.too_deep``), before anything
recursive reads it.
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

TOO_DEEP = reason(
    "schedule.text.too_deep",
    "A JSON value nests objects or arrays deeper than the edges accept (32 levels)",
)
MAX_DEPTH = 32
"""Levels of objects and arrays a JSON value may nest (the deepest legal value, a tool
call's yearly cadence, nests four)."""

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
    reported field is a JSON path under ``field`` such as ``cadence.timezone``.

    Containers nested deeper than ``MAX_DEPTH`` are ``schedule.text.too_deep``. The walk
    is iterative, so the bound, not the interpreter's recursion limit, decides: a
    document a JSON parser still accepts (about a thousand levels) would otherwise make
    every recursive step after this one (parsing the cadence, scanning, hashing) raise
    ``RecursionError``, a 5xx instead of an answer. Strings are checked in document
    order, so the first offending one is the one reported."""
    stack: list[tuple[str, Any, int]] = [(field, value, 0)]
    while stack:
        name, item, depth = stack.pop()
        if isinstance(item, str):
            check_text(name, item)
            continue
        if isinstance(item, Mapping):
            children = [
                (f"{name}.{check_text(name, key) if isinstance(key, str) else key}", child)
                for key, child in item.items()
            ]
        elif isinstance(item, list | tuple):
            children = [(f"{name}[{index}]", child) for index, child in enumerate(item)]
        else:
            continue
        if depth >= MAX_DEPTH:
            raise too_deep(field)
        stack.extend((path, child, depth + 1) for path, child in reversed(children))
    return value


def check_depth(field: str, value: Any) -> Any:
    """``value`` unchanged, or ``schedule.text.too_deep`` when its containers nest
    deeper than ``MAX_DEPTH`` (iterative; strings are not inspected)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth >= MAX_DEPTH:
            raise too_deep(field)
        stack.extend((child, depth + 1) for child in children)
    return value


def too_deep(field: str) -> ValidationError:
    return ValidationError(
        TOO_DEEP,
        f"{field} nests deeper than {MAX_DEPTH} levels",
        {"field": field, "max_depth": MAX_DEPTH},
    )
