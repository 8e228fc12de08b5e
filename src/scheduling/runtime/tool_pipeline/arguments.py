"""Closed-schema validation of tool arguments (the ``jsonschema`` library, Draft 2020-12)
and the canonical hash that recognises a replayed call.

Every string of the arguments, keys included, first passes the one boundary text
validator (``scheduling.domain.text.check_tree``: NUL and lone surrogates fail as
``schedule.text.invalid``), before the schema, any hash, scan, approval or SQL. A
failure names the JSON path and the schema keyword that failed, never the value
(arguments may hold an instruction or credential-shaped text).

The hash is over the tool's *normalized* arguments (``RegisteredTool.normalize``, ADR
2102), so a retry whose arguments differ only in spelling (selector order, ``HH:MM``
for ``HH:MM:SS``, another offset of one instant, a default left out) replays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from scheduling.domain.canonical import canonical_json, content_hash
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.text import check_tree
from scheduling.runtime.tool_pipeline.spec import ToolSpec

INVALID_ARGUMENTS = reason(
    "schedule.tool.invalid_arguments",
    "The tool arguments do not match the tool's closed input schema",
)

# Compiled validators by schema content (specs are frozen; equal schemas share one).
_VALIDATORS: dict[str, Draft202012Validator] = {}


def _validator(spec: ToolSpec) -> Draft202012Validator:
    key = canonical_json(dict(spec.input_schema))
    found = _VALIDATORS.get(key)
    if found is None:
        Draft202012Validator.check_schema(dict(spec.input_schema))
        found = _VALIDATORS[key] = Draft202012Validator(dict(spec.input_schema))
    return found


def validate_arguments(spec: ToolSpec, arguments: object) -> dict[str, Any]:
    """``arguments`` as a plain dict when the closed schema accepts it."""
    if not isinstance(arguments, Mapping):
        raise ValidationError(INVALID_ARGUMENTS, "arguments must be a JSON object")
    plain = dict(arguments)
    check_tree("arguments", plain)
    errors = sorted(_validator(spec).iter_errors(plain), key=lambda e: list(e.absolute_path))
    if errors:
        problems = [
            {"path": "$" + "".join(f"[{p!r}]" for p in e.absolute_path), "rule": str(e.validator)}
            for e in errors[:10]
        ]
        raise ValidationError(
            INVALID_ARGUMENTS, "the arguments do not match the tool schema", {"problems": problems}
        )
    return plain


def arguments_hash(spec: ToolSpec, arguments: Mapping[str, Any]) -> str:
    """Canonical hash of tool, version and (normalized) arguments (key order does not
    matter)."""
    return content_hash({"tool": spec.name, "version": spec.version, "arguments": dict(arguments)})
