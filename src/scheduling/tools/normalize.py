"""The canonical form of each schedule tool's schema-valid arguments (ADR 2102).

The pipeline hashes a governed call's arguments into its ledger row after this
normalization, and ``prepare`` receives the normalized form, so a retry with the same
key whose arguments mean the same call replays instead of failing as
``schedule.idempotency.key_reused``: weekdays, days and dates sorted, ``HH:MM`` as
``HH:MM:SS``, an instant as canonical UTC text, a UUID in lower case, defaults filled
(``limit`` 50, absent flags false). The domain's ``parse_cadence`` is the one
authority: a value it refuses fails here with its own stable code, exactly as it would
in ``prepare``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from scheduling.domain.cadence import parse_cadence
from scheduling.runtime.tool_pipeline import Normalizer, ToolSpec
from scheduling.tools.schemas import LIST_MAX

FLAGS = ("use_website", "place_call")


def _at(value: Any) -> str:
    return str(parse_cadence({"kind": "ONCE", "at": value}).to_payload()["at"])


def _when(arguments: Mapping[str, Any], out: dict[str, Any]) -> None:
    if "at" in arguments:
        out["at"] = _at(arguments["at"])
    if "cadence" in arguments:
        out["cadence"] = parse_cadence(arguments["cadence"]).to_payload()


def _id(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "schedule_id": str(UUID(str(arguments["schedule_id"]))),
        "expected_revision": int(arguments["expected_revision"]),
    }


def _create(flags: tuple[str, ...]) -> Normalizer:
    def normalize(arguments: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "title": arguments["title"],
            "instruction": arguments["instruction"],
        }
        _when(arguments, out)
        for flag in flags:
            out[flag] = arguments.get(flag) is True
        return out

    return normalize


def normalize_list(arguments: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"limit": int(arguments.get("limit", LIST_MAX))}
    if arguments.get("cursor") is not None:
        out["cursor"] = arguments["cursor"]
    return out


def normalize_update(arguments: Mapping[str, Any]) -> dict[str, Any]:
    out = _id(arguments)
    for name in ("title", "instruction"):
        if name in arguments:
            out[name] = arguments[name]
    _when(arguments, out)
    return out


def normalize_mutation(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return _id(arguments)


def normalizer(spec: ToolSpec) -> Normalizer:
    """The normalizer of one schedule tool version."""
    if spec.name == "schedule.create":
        properties = spec.input_schema.get("properties", {})
        return _create(tuple(flag for flag in FLAGS if flag in properties))
    if spec.name == "schedule.list":
        return normalize_list
    if spec.name == "schedule.update":
        return normalize_update
    return normalize_mutation
