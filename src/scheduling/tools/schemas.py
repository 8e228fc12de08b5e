"""The closed JSON Schemas (Draft 2020-12) of the six schedule tools' inputs.

Structure only: every object is closed (``additionalProperties: false``), types and
ranges are exact. Calendar meaning (possible month/day pairs, uniqueness, IANA zones,
timezone-aware instants) stays with the domain's ``parse_cadence``, the one authority,
so the tool and the HTTP edge reject the same values with the same codes.
"""

from __future__ import annotations

from typing import Any

from scheduling.domain.revision import MAX_INSTRUCTION, MAX_TITLE

LIST_MAX = 50

_LOCAL_TIME = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$"}
_ZONE = {"type": "string", "minLength": 1, "maxLength": 64}


def _civil(kind: str, extra: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["kind", "local_time", "timezone", *required],
        "properties": {
            "kind": {"const": kind},
            "local_time": _LOCAL_TIME,
            "timezone": _ZONE,
            **extra,
        },
    }


CADENCE: dict[str, Any] = {
    "oneOf": [
        _civil("DAILY", {}, []),
        _civil(
            "WEEKLY",
            {
                "weekdays": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 7,
                    "items": {"type": "integer", "minimum": 1, "maximum": 7},
                }
            },
            ["weekdays"],
        ),
        _civil(
            "MONTHLY",
            {
                "days_of_month": {
                    "type": "array",
                    "maxItems": 31,
                    "items": {"type": "integer", "minimum": 1, "maximum": 31},
                },
                "last_day": {"type": "boolean"},
            },
            [],
        ),
        _civil(
            "YEARLY",
            {
                "dates": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 366,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["month", "day"],
                        "properties": {
                            "month": {"type": "integer", "minimum": 1, "maximum": 12},
                            "day": {"type": "integer", "minimum": 1, "maximum": 31},
                        },
                    },
                }
            },
            ["dates"],
        ),
    ]
}

TITLE = {"type": "string", "minLength": 1, "maxLength": MAX_TITLE}
INSTRUCTION = {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTION}
AT = {"type": "string", "minLength": 1, "maxLength": 64}
SCHEDULE_ID = {
    "type": "string",
    "pattern": "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
}
REVISION = {"type": "integer", "minimum": 1}

# Exactly one of at / cadence.
_ONE_WHEN = [
    {"required": ["at"], "not": {"required": ["cadence"]}},
    {"required": ["cadence"], "not": {"required": ["at"]}},
]


def create_schema(*, website: bool, calling: bool = False) -> dict[str, Any]:
    """schedule.create 1.1.1 (title, instruction, at, cadence), 1.2.0 (``website``: adds
    use_website) or 1.3.0 (``website`` and ``calling``: adds place_call too, ADR-0213;
    the flag fails closed while calling is not composed)."""
    properties: dict[str, Any] = {
        "title": TITLE,
        "instruction": INSTRUCTION,
        "at": AT,
        "cadence": CADENCE,
    }
    if website:
        properties["use_website"] = {"type": "boolean"}
    if calling:
        properties["place_call"] = {"type": "boolean"}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["title", "instruction"],
        "properties": properties,
        "oneOf": _ONE_WHEN,
    }


LIST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": LIST_MAX},
        "cursor": {"type": "string", "minLength": 1, "maxLength": 1024},
    },
}

MUTATION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schedule_id", "expected_revision"],
    "properties": {"schedule_id": SCHEDULE_ID, "expected_revision": REVISION},
}

UPDATE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schedule_id", "expected_revision"],
    "properties": {
        "schedule_id": SCHEDULE_ID,
        "expected_revision": REVISION,
        "title": TITLE,
        "instruction": INSTRUCTION,
        "at": AT,
        "cadence": CADENCE,
    },
    # An empty patch and at-with-cadence are the service's own failures
    # (schedule.patch.empty, schedule.patch.at_and_cadence), raised before approval.
}
