"""Tests of the structural model-tool gates: a registry that differs from the spec's
tables in any classification field, input property or flag rule is reported; every
quotation in ``tool_expectations`` still occurs verbatim in the spec; and an edited
quotation (not only an edited registry) turns the contract red."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gates.checks import tool_expectations as expectations
from gates.checks.tool_expectations import (
    create_contract_problems,
    flag_problems,
    lifecycle_contract_problems,
)
from scheduling.runtime.tool_pipeline import (
    Idempotency,
    RegisteredTool,
    Risk,
    SideEffect,
    ToolRegistry,
    ToolSpec,
)
from scheduling.tools import SCHEDULE_TOOL_NAMES, default_agent_roster, schedule_tool_specs


class Nothing:
    async def prepare(self, arguments: Any, context: Any) -> Any:  # pragma: no cover
        raise AssertionError


def registry(specs: list[ToolSpec]) -> ToolRegistry:
    return ToolRegistry(RegisteredTool(spec, handler=Nothing()) for spec in specs)


def test_the_shipped_specs_match_the_spec_tables() -> None:
    shipped = registry(schedule_tool_specs())
    assert create_contract_problems(shipped) == []
    assert lifecycle_contract_problems(shipped) == []


MUTATIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("schedule.create", "risk", {"risk": Risk.MEDIUM}),
    ("schedule.create", "scope", {"required_scopes": frozenset({"schedule.read"})}),
    ("schedule.create", "wider", {"required_scopes": frozenset({"schedule.write", "run.cancel"})}),
    ("schedule.create", "timeout", {"timeout_seconds": 30}),
    ("schedule.create", "ceiling", {"maximum_output_bytes": 8192}),
    ("schedule.create", "parallel", {"allow_parallel": True}),
    ("schedule.create", "idempotency", {"idempotency": Idempotency.IDEMPOTENT}),
    ("schedule.create", "no approval", {"side_effect": SideEffect.NONE}),
    ("schedule.list", "ceiling", {"maximum_output_bytes": 4096}),
    ("schedule.list", "parallel", {"allow_parallel": False}),
    ("schedule.update", "idempotency", {"idempotency": Idempotency.IDEMPOTENT}),
    ("schedule.pause", "risk", {"risk": Risk.LOW}),
    ("schedule.resume", "scope", {"required_scopes": frozenset({"schedule.read"})}),
    ("schedule.cancel", "effect", {"side_effect": SideEffect.EXTERNAL_WRITE}),
    ("schedule.cancel", "scope", {"required_scopes": frozenset({"schedule.write"})}),
    ("schedule.cancel", "timeout", {"timeout_seconds": 60}),
    (
        "schedule.update",
        "input",
        {
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "schedule_id": {},
                    "expected_revision": {},
                    "title": {},
                    "limits": {},
                },
            }
        },
    ),
    ("schedule.update", "open input", {"input_schema": {"type": "object", "properties": {}}}),
]


@pytest.mark.parametrize(
    ("tool", "label", "change"), MUTATIONS, ids=[f"{tool}-{label}" for tool, label, _ in MUTATIONS]
)
def test_any_changed_field_turns_the_contract_red(
    tool: str, label: str, change: dict[str, Any]
) -> None:
    specs = []
    for spec in schedule_tool_specs():
        if spec.name == tool:
            values = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
            values.update(change)
            spec = object.__new__(ToolSpec)  # bypass validation: a wrong spec may be malformed
            for name, value in values.items():
                object.__setattr__(spec, name, value)
        specs.append(spec)
    shipped = registry(specs)
    problems = create_contract_problems(shipped) + lifecycle_contract_problems(shipped)
    assert problems, f"{tool} {label} went unnoticed"


def test_a_missing_create_version_or_tool_is_reported() -> None:
    specs = [
        s for s in schedule_tool_specs() if (s.name, s.version) != ("schedule.create", "1.1.1")
    ]
    assert create_contract_problems(registry(specs))
    specs = [s for s in schedule_tool_specs() if s.name != "schedule.resume"]
    assert lifecycle_contract_problems(registry(specs))


@pytest.mark.parametrize(("api", "worker"), [(True, False), (False, True), (False, False)])
def test_registering_without_both_flags_is_reported(api: bool, worker: bool) -> None:
    # A wrong build that registers regardless of the flags, or rosters them anyway.
    assert flag_problems(SCHEDULE_TOOL_NAMES, frozenset(), api=api, worker=worker)
    assert flag_problems(frozenset(), SCHEDULE_TOOL_NAMES, api=api, worker=worker)
    right = default_agent_roster(api_enabled=api, worker_enabled=worker)
    assert flag_problems(frozenset(), right, api=api, worker=worker) == []


def test_a_partial_registration_under_both_flags_is_reported() -> None:
    assert flag_problems(
        SCHEDULE_TOOL_NAMES - {"schedule.list"}, SCHEDULE_TOOL_NAMES, api=True, worker=True
    )
    assert flag_problems(
        SCHEDULE_TOOL_NAMES, SCHEDULE_TOOL_NAMES | {"schedule.delete"}, api=True, worker=True
    )


# ------------------------------------------------------------ the quotations themselves

ROOT = Path(__file__).resolve().parents[2]
SPEC_CANDIDATES = (
    ROOT.parent / "shared" / "spec" / "scheduled-runs.md",
    Path("/work/shared/spec/scheduled-runs.md"),
)


def spec_text() -> str:
    for path in SPEC_CANDIDATES:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    pytest.skip(f"the spec is not checked out beside the project ({SPEC_CANDIDATES[0]})")


@pytest.mark.parametrize("quoted", expectations.QUOTATIONS, ids=lambda q: q[:40])
def test_every_quotation_occurs_verbatim_in_the_spec(quoted: str) -> None:
    assert quoted in spec_text(), f"the spec no longer says: {quoted!r}"


def test_the_parsed_expectations_say_what_the_spec_says() -> None:
    # Read off the quotations by hand, so a parser that drifts is caught too.
    assert expectations.create_versions() == ("1.1.1", "1.2.0", "1.3.0")
    base = {"title", "instruction", "at", "cadence"}
    assert expectations.create_inputs() == {
        "1.1.1": base,
        "1.2.0": base | {"use_website"},
        "1.3.0": base | {"use_website", "place_call"},
    }
    assert expectations.ceilings() == (524_288, 4_096)
    assert expectations.list_maximum() == 50
    assert {n for n in expectations.SCHEDULE_TOOLS if expectations.approval_required(n)} == (
        expectations.SCHEDULE_TOOLS - {"schedule.list"}
    )


TRANSCRIPTION_EDITS: list[tuple[str, str, str, str]] = [
    ("CREATE_BLOCK", "risk                 high", "risk                 medium", "create risk"),
    ("CREATE_BLOCK", "maximum_output_bytes 4096", "maximum_output_bytes 8192", "create ceiling"),
    (
        "LIFECYCLE_TABLE",
        "schedule.cancel   external_delete",
        "schedule.cancel   external_write",
        "cancel",
    ),
    ("LIFECYCLE_TABLE", "schedule.read     true", "schedule.read     false", "list parallel"),
    ("LIFECYCLE_SENTENCE", "a 15-second timeout", "a 30-second timeout", "timeout"),
    ("LIFECYCLE_SENTENCE", "524,288-byte", "262,144-byte", "discovery ceiling"),
    ("VERSION_SENTENCES", "(version 1.3.0,", "(version 1.2.0,", "place_call version"),
    ("VERSION_SENTENCES", "version 1.2.0 accepts", "version 1.2.1 accepts", "website version"),
    ("LIST_INPUT_SENTENCE", "optional opaque cursor", "optional opaque token", "list input"),
]


@pytest.mark.parametrize(
    ("name", "old", "new", "label"), TRANSCRIPTION_EDITS, ids=[e[3] for e in TRANSCRIPTION_EDITS]
)
def test_a_changed_transcription_turns_the_contract_red(
    name: str, old: str, new: str, label: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = registry(schedule_tool_specs())
    baseline = create_contract_problems(shipped) + lifecycle_contract_problems(shipped)
    value = getattr(expectations, name)
    if isinstance(value, tuple):
        assert any(old in item for item in value), f"{old!r} is not in {name}"
        changed: object = tuple(item.replace(old, new) for item in value)
    else:
        assert old in value, f"{old!r} is not in {name}"
        changed = value.replace(old, new)
    monkeypatch.setattr(expectations, name, changed)
    after = create_contract_problems(shipped) + lifecycle_contract_problems(shipped)
    assert after != baseline, f"{label}: the edited transcription changed nothing"
    assert len(after) > len(baseline), f"{label}: {after}"
