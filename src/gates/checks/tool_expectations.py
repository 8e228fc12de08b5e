"""The spec's tool tables transcribed as data, and the field-by-field comparison
(not a test module).

Transcribed by hand from scheduled-runs.md, independent of the registry: the
"Model-callable creation" block of schedule.create and the "Model-callable lifecycle"
table of the five lifecycle tools (with the sentence after it: in_process,
internal_tool, 15 s, 524,288 bytes for discovery and 4,096 for a mutation). The table
abbreviates ``conditional``; the creation block spells it ``conditionally_idempotent``.
"""

from __future__ import annotations

from typing import Any

from scheduling.runtime.tool_pipeline import ApprovalPolicy, ToolRegistry, ToolSpec
from scheduling.runtime.tool_pipeline.spec import open_objects

CREATE_BLOCK = """
name                 schedule.create
kind                 capability
source               builtin
target_kind          in_process
side_effect          external_write
risk                 high
idempotency          conditionally_idempotent
required_scopes      schedule.write
timeout_seconds      15
maximum_output_bytes 4096
allow_parallel       false
output_trust         internal_tool
"""

LIFECYCLE_TABLE = """
schedule.list     none             low   read_only    schedule.read     true
schedule.update   external_write   high  conditional  schedule.write    false
schedule.pause    external_write   high  idempotent   schedule.write    false
schedule.resume   external_write   high  idempotent   schedule.write    false
schedule.cancel   external_delete  high  idempotent   schedule.cancel   false
"""
LIFECYCLE_COMMON = {
    "kind": "capability",
    "source": "builtin",
    "target_kind": "in_process",
    "output_trust": "internal_tool",
    "timeout_seconds": 15,
}
DISCOVERY_BYTES, MUTATION_BYTES = 524_288, 4_096
CREATE_VERSIONS = ("1.1.1", "1.2.0")
ABBREVIATIONS = {"conditional": "conditionally_idempotent"}

# The closed inputs: exactly these properties (spec "Model-callable creation" / lifecycle).
CREATE_INPUT = {
    "1.1.1": {"title", "instruction", "at", "cadence"},
    "1.2.0": {"title", "instruction", "at", "cadence", "use_website", "place_call"},
}
LIST_INPUT = {"limit", "cursor"}
MUTATION_INPUT = {"schedule_id", "expected_revision"}
UPDATE_INPUT = {"schedule_id", "expected_revision", "title", "instruction", "at", "cadence"}


def _value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    return int(raw) if raw.isdigit() else raw


def create_expected() -> dict[str, Any]:
    fields = dict(line.split(None, 1) for line in CREATE_BLOCK.strip().splitlines())
    out = {key: _value(value.strip()) for key, value in fields.items()}
    out["required_scopes"] = [out["required_scopes"]]
    return out


def lifecycle_expected() -> dict[str, dict[str, Any]]:
    rows = {}
    for line in LIFECYCLE_TABLE.strip().splitlines():
        name, effect, risk, idem, scope, parallel = line.split()
        rows[name] = {
            "name": name,
            **LIFECYCLE_COMMON,
            "side_effect": effect,
            "risk": risk,
            "idempotency": ABBREVIATIONS.get(idem, idem),
            "required_scopes": [scope],
            "allow_parallel": parallel == "true",
            "maximum_output_bytes": DISCOVERY_BYTES if name == "schedule.list" else MUTATION_BYTES,
        }
    return rows


def classification_problems(spec: ToolSpec | None, expected: dict[str, Any]) -> list[str]:
    """Every field where the registered spec differs from the spec's table."""
    name = expected["name"]
    if spec is None:
        return [f"{name}: not registered"]
    actual = spec.classification()
    problems = [
        f"{name}@{spec.version}.{key}: registered {actual.get(key)!r}, spec says {want!r}"
        for key, want in expected.items()
        if actual.get(key) != want
    ]
    approval = ApprovalPolicy().requires_approval(spec)
    if approval != (expected["side_effect"] != "none"):
        problems.append(f"{name}: approval required={approval} for {expected['side_effect']}")
    return problems


def input_problems(spec: ToolSpec, properties: set[str]) -> list[str]:
    """The input schema is closed everywhere and admits exactly ``properties``."""
    problems = [
        f"{spec.name}@{spec.version}: open object at {p}" for p in open_objects(spec.input_schema)
    ]
    actual = set(spec.input_schema.get("properties", {}))
    if actual != properties:
        problems.append(
            f"{spec.name}@{spec.version}: inputs {sorted(actual)} are not {sorted(properties)}"
        )
    return problems


def create_contract_problems(registry: ToolRegistry) -> list[str]:
    expected = create_expected()
    problems: list[str] = []
    versions = [spec.version for spec in registry.versions("schedule.create")]
    if tuple(versions) != CREATE_VERSIONS:
        problems.append(f"schedule.create versions {versions} are not {list(CREATE_VERSIONS)}")
    for version in CREATE_VERSIONS:
        tool = registry.get("schedule.create", version)
        spec = None if tool is None else tool.spec
        problems += classification_problems(spec, expected)
        if spec is not None:
            problems += input_problems(spec, CREATE_INPUT[version])
    newest = registry.get("schedule.create")
    if newest is not None and newest.spec.version != CREATE_VERSIONS[-1]:
        problems.append(f"schedule.create advertises {newest.spec.version}")
    return problems


def lifecycle_contract_problems(registry: ToolRegistry) -> list[str]:
    problems: list[str] = []
    inputs = {"schedule.list": LIST_INPUT, "schedule.update": UPDATE_INPUT}
    for name, expected in lifecycle_expected().items():
        tool = registry.get(name)
        problems += classification_problems(None if tool is None else tool.spec, expected)
        if tool is not None:
            problems += input_problems(tool.spec, inputs.get(name, MUTATION_INPUT))
    return problems


SCHEDULE_TOOLS = frozenset({"schedule.create", *lifecycle_expected()})


def flag_problems(
    registered: frozenset[str], roster: frozenset[str], *, api: bool, worker: bool
) -> list[str]:
    """Both flags on: exactly the six schedule tools registered and on the roster; else none."""
    want = SCHEDULE_TOOLS if api and worker else frozenset()
    problems = []
    got = frozenset(n for n in registered if n.startswith("schedule."))
    on_roster = frozenset(n for n in roster if n.startswith("schedule."))
    if got != want:
        problems.append(f"flags api={api} worker={worker}: registered {sorted(got)}")
    if on_roster != want:
        problems.append(f"flags api={api} worker={worker}: roster {sorted(on_roster)}")
    return problems
