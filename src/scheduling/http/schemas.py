"""The constraints the OpenAPI document states, written once from the validators' own
values (ADR 2132): what a field accepts is declared where it is enforced.

Shape constraints the domain checks with its own stable codes (a positive bound, a
non-blank title, a cadence's calendar values) are declared in the document only; the
domain keeps answering its ``schedule.*`` code. What depends on state or time (the
agent exists, the scope is held, the tenant's ceilings, a cadence's next occurrence,
the secret scanner, a cursor the server issued) cannot be declared and is listed in
``tests/http/test_schemathesis.py`` as the refusals positive data may meet.
"""

from __future__ import annotations

from typing import Any

from scheduling.domain.recurrence.zones import zone_keys
from scheduling.domain.revision import MAX_INSTRUCTION, MAX_TITLE
from scheduling.service.validation import MAX_IDEMPOTENCY_KEY, PLATFORM_SCOPES

INT32_MAX = 2**31 - 1
"""Every integer the product stores is a PostgreSQL ``integer``."""

# Python's str.isspace() characters (what the domain strips before "must not be empty").
_SPACE = (
    r"\t\n\u000b\u000c\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
)
TEXT_PATTERN = rf"^[^\u0000]*[^\u0000{_SPACE}][^\u0000]*$"
"""No NUL anywhere, and at least one character that is not white space."""
IDEMPOTENCY_KEY_PATTERN = rf"^[!-~]{{1,{MAX_IDEMPOTENCY_KEY}}}$"
LOCAL_TIME_PATTERN = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?$"
INSTANT_PATTERN = (
    r"^(?:1[0-9]|[2-8][0-9]|9[0-8])[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3])"
    r":[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)
POSITIVE_DECIMAL = (
    r"^(?:[0-9]{0,12}[1-9][0-9]{0,12}(?:\.[0-9]{0,12})?|[0-9]{0,12}\.[0-9]{0,12}[1-9][0-9]{0,12})$"
)
DECIMAL = r"^(?:[0-9]{1,12}(?:\.[0-9]{0,12})?|\.[0-9]{1,12})$"


def text(max_length: int) -> dict[str, Any]:
    """A stored free text: 1..max characters, not blank, no NUL."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": max_length,
        "pattern": TEXT_PATTERN,
    }


TITLE = text(MAX_TITLE)
INSTRUCTION = text(MAX_INSTRUCTION)
NAME: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": TEXT_PATTERN}
SCOPE_ITEM: dict[str, Any] = {"type": "string", "enum": sorted(PLATFORM_SCOPES)}


def bounded(minimum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": INT32_MAX}


def money(*, positive: bool) -> dict[str, Any]:
    number: dict[str, Any] = {"type": "number"}
    number["exclusiveMinimum" if positive else "minimum"] = 0
    pattern = POSITIVE_DECIMAL if positive else DECIMAL
    return {
        "anyOf": [{"type": "string", "pattern": pattern}, number],
        "description": 'a decimal amount, e.g. "2.50"',
    }


def _civil(kind: str, required: tuple[str, ...] = (), **extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["kind", "local_time", "timezone", *required],
        "properties": {
            "kind": {"const": kind},
            "local_time": {"type": "string", "pattern": LOCAL_TIME_PATTERN},
            "timezone": {"type": "string", "enum": sorted(zone_keys())},
            **extra,
        },
    }


def _days(low: int, high: int, max_items: int) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "integer", "minimum": low, "maximum": high},
        "minItems": 1,
        "maxItems": max_items,
        "uniqueItems": True,
    }


_MONTH_LENGTHS = {31: [1, 3, 5, 7, 8, 10, 12], 30: [4, 6, 9, 11], 29: [2]}
_MONTH_DAY = {
    "anyOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["month", "day"],
            "properties": {
                "month": {"type": "integer", "enum": months},
                "day": {"type": "integer", "minimum": 1, "maximum": days},
            },
        }
        for days, months in _MONTH_LENGTHS.items()
    ]
}
# MONTHLY selects days_of_month (1..31, at least one) and/or last_day (true).
_MONTHLY_WITH_DAYS = _civil(
    "MONTHLY",
    ("days_of_month",),
    days_of_month=_days(1, 31, 31),
    last_day={"type": "boolean"},
)
_MONTHLY_LAST_DAY = _civil(
    "MONTHLY",
    ("last_day",),
    days_of_month={**_days(1, 31, 31), "minItems": 0},
    last_day={"const": True},
)

CADENCE: dict[str, Any] = {
    "description": (
        "One closed cadence payload, by kind. ONCE: an RFC 3339 instant with an offset"
        " (strictly in the future); DAILY, WEEKLY (ISO weekdays 1-7), MONTHLY (days 1-31"
        " and/or last_day) and YEARLY (month/day pairs that exist in some year): a wall"
        " time HH:MM[:SS] in an IANA zone of the server's tzdata."
    ),
    "anyOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["kind", "at"],
            "properties": {
                "kind": {"const": "ONCE"},
                "at": {"type": "string", "format": "date-time", "pattern": INSTANT_PATTERN},
            },
        },
        _civil("DAILY"),
        _civil("WEEKLY", ("weekdays",), weekdays=_days(1, 7, 7)),
        _MONTHLY_WITH_DAYS,
        _MONTHLY_LAST_DAY,
        _civil(
            "YEARLY",
            ("dates",),
            dates={
                "type": "array",
                "items": _MONTH_DAY,
                "minItems": 1,
                "maxItems": 366,
                "uniqueItems": True,
            },
        ),
    ],
}
