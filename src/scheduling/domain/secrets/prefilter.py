"""Necessary conditions per detector pattern: sets of characters such that every match
consumes one character of each set (ADR 2600).

Most detectors cannot match most text: ``password=...`` needs ``=`` or ``:``, a Slack
token needs ``-``, a JWT needs ``.`` and a ``J``. The scanner runs every detector's regex
over every window, and a regex that starts with a lookbehind tests every position, so a
clean sentence costs all of them. ``required_sets`` derives, from the parsed pattern,
sets of ASCII characters such that any match consumes at least one character of each;
a pure-ASCII window missing every character of one of them cannot contain a match of
that pattern and is not searched with it.

The sets are derived, not written by hand, so they cannot drift from the table:

* a literal, a class or ``.`` needs the ASCII characters it matches, found by matching
  each of the 128 against that one element compiled alone with the flags in force
  (so ``IGNORECASE``, negated classes and categories are the engine's own answer);
* a sequence needs what each of its mandatory elements needs (all of it);
* a repetition needs what its body needs only when it repeats at least once;
* alternatives need the union of one set of each, or nothing if one needs nothing;
* assertions (lookarounds, ``\\b``, anchors) consume nothing and need nothing.

An empty tuple means no condition (the detector always runs), which is also the answer
to anything the walk does not know. Non-ASCII windows always run every detector: their
case-insensitive equivalences (``K`` for ``k``) are outside the 128 characters tested.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

# The engine's own parser and compiler (stable since 3.11, the only Python this runs
# on); imported by name because they are private, unstubbed modules.
_parser: Any = importlib.import_module("re._parser")
_compiler: Any = importlib.import_module("re._compiler")

ASCII = tuple(chr(code) for code in range(128))
_LEAVES = frozenset({"LITERAL", "NOT_LITERAL", "IN", "ANY"})
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})


def required_sets(pattern: re.Pattern[str]) -> tuple[frozenset[str], ...]:
    """ASCII character sets each of which every match of ``pattern`` consumes one
    character of (none but the minimal ones: a superset of another says nothing more);
    empty: no condition."""
    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
        needs = _sequence(list(parsed), parsed.state.flags)
    except Exception:
        return ()
    distinct = sorted(set(needs), key=_rank)
    return tuple(s for s in distinct if not any(t < s for t in distinct))


def _rank(chars: frozenset[str]) -> tuple[int, int, str]:
    # Letters, digits and spaces are in almost every text; punctuation rarely is.
    common = sum(1 for c in chars if c.isalnum() or c.isspace())
    return (common, len(chars), "".join(sorted(chars)))


def _sequence(items: list[Any], flags: int) -> list[frozenset[str]]:
    needs: list[frozenset[str]] = []
    for item in items:
        needs += _item(item, flags)
    return needs


def _item(item: Any, flags: int) -> list[frozenset[str]]:
    op, value = item
    name = str(op)
    if name in _LEAVES:
        return [_leaf(item, flags)]
    if name == "SUBPATTERN":
        _group, add, delete, body = value
        return _sequence(list(body), (flags | add) & ~delete)
    if name == "ATOMIC_GROUP":
        return _sequence(list(value), flags)
    if name in _REPEATS:
        low, _high, body = value
        return _sequence(list(body), flags) if low >= 1 else []
    if name == "BRANCH":
        _, alternatives = value
        union: set[str] = set()
        for alternative in alternatives:
            needs = _sequence(list(alternative), flags)
            if not needs:
                return []
            best: frozenset[str] = min(needs, key=_rank)
            union |= best
        return [frozenset(union)]
    return []  # AT, ASSERT, ASSERT_NOT, GROUPREF...: nothing consumed for certain


def _leaf(item: Any, flags: int) -> frozenset[str]:
    state = _parser.State()
    state.flags = flags
    alone = _compiler.compile(_parser.SubPattern(state, [item]), flags)
    return frozenset(c for c in ASCII if alone.fullmatch(c) is not None)
