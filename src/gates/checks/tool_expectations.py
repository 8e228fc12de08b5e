"""The spec's tool tables, quoted verbatim from scheduled-runs.md and parsed here, and the
field-by-field comparison (not a test module).

Every expectation below is derived from the quoted spec text, not from the product:
the "Model-callable creation" block of schedule.create, the "Model-callable
lifecycle" table of the five lifecycle tools with the sentence after it (in_process,
internal_tool, 15 s, 524,288 bytes for discovery and 4,096 for a mutation), the
sentences that name the schedule.create versions (1.1.1, 1.2.0 with use_website,
1.3.0 with place_call), the input sentences and the two approval sentences. Nothing
from ``scheduling`` is imported to decide what is right: whether a call needs
approval is the spec's sentence here, and the gates observe it through the pipeline
(``tool_checks.approval_behaviour_check``). ``tests/unit/test_gate_hardening_model_
contract.py`` checks that every quoted string still occurs in the spec text, and that
changing a quotation turns the contract red. The table abbreviates ``conditional``;
the creation block spells it ``conditionally_idempotent``.
"""

from __future__ import annotations

import json
import re
from typing import Any

# ---------------------------------------------------------------- verbatim quotations

CREATE_BLOCK = """name                 schedule.create
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
output_trust         internal_tool"""

LIFECYCLE_TABLE = """name              side_effect      risk  idempotency  scope            parallel
----------------  ---------------  ----  -----------  ---------------  --------
schedule.list     none             low   read_only    schedule.read     true
schedule.update   external_write   high  conditional  schedule.write    false
schedule.pause    external_write   high  idempotent   schedule.write    false
schedule.resume   external_write   high  idempotent   schedule.write    false
schedule.cancel   external_delete  high  idempotent   schedule.cancel   false"""

LIFECYCLE_SENTENCE = (
    "All five use target_kind: in_process, output_trust: internal_tool, and a 15-second"
    " timeout. Discovery has a 524,288-byte output ceiling so the bounded fifty-record page"
    " remains valid even when every record carries the largest legal yearly selector; one"
    " mutation has a 4,096-byte ceiling."
)
LIFECYCLE_COMMON_KIND = "Five builtin capabilities are registered beside schedule.create"

VERSION_SENTENCES = (
    "schedule.create version 1.2.0 accepts use_website=true to select the current chat's"
    " trusted website binding and request browser.profile.read.",
    "Version 1.1.1 remains for already pinned runs.",
    "or place_call=true (version 1.3.0, ADR-0213) requests exactly mcp.bland_call.use and"
    " mcp.bland_read.use",
)

CREATE_INPUT_SENTENCE = (
    "title and instruction are always required, and exactly one of the compatible one-time"
    " at field or a recurring cadence object is required"
)
LIST_INPUT_SENTENCE = (
    "schedule.list accepts an optional limit from 1 through 50, defaulting to 50, and an"
    " optional opaque cursor."
)
MUTATION_INPUT_BLOCK = """{
  "schedule_id": "66af9c8d-d71c-4b36-bb06-cd44d4800bad",
  "expected_revision": 3
}"""
UPDATE_INPUT_SENTENCES = (
    "schedule.update accepts the same stable identity fields plus a closed patch:",
    "At least one of title, instruction, at, or cadence is required.",
)

APPROVAL_SENTENCES = (
    "The ordinary pipeline checks the exact schedule.write scope and the default policy"
    " requires approval for its EXTERNAL_WRITE classification.",
    "The ordinary pipeline checks the exact scope before approval, and the existing default"
    " policy requires approval for every lifecycle mutation.",
)

QUOTATIONS = (
    CREATE_BLOCK,
    LIFECYCLE_TABLE,
    LIFECYCLE_SENTENCE,
    LIFECYCLE_COMMON_KIND,
    *VERSION_SENTENCES,
    CREATE_INPUT_SENTENCE,
    LIST_INPUT_SENTENCE,
    MUTATION_INPUT_BLOCK,
    *UPDATE_INPUT_SENTENCES,
    *APPROVAL_SENTENCES,
)

ABBREVIATIONS = {"conditional": "conditionally_idempotent"}
_VERSION = r"(\d+\.\d+\.\d+)"


def _value(raw: str) -> Any:
    if raw in ("true", "false"):
        return raw == "true"
    return int(raw) if raw.isdigit() else raw


def _bytes(raw: str) -> int:
    return int(raw.replace(",", ""))


def _match(pattern: str, text: str) -> re.Match[str]:
    found = re.search(pattern, text)
    if found is None:
        raise ValueError(f"the quotation {text!r} no longer says {pattern!r}")
    return found


# ---------------------------------------------------------------- parsed expectations


def create_expected() -> dict[str, Any]:
    fields = dict(line.split(None, 1) for line in CREATE_BLOCK.strip().splitlines())
    out = {key: _value(value.strip()) for key, value in fields.items()}
    out["required_scopes"] = [out["required_scopes"]]
    return out


def lifecycle_common() -> dict[str, Any]:
    s = LIFECYCLE_SENTENCE
    kind = _match(r"Five (\w+) (\w+) are registered", LIFECYCLE_COMMON_KIND)
    return {
        "kind": {"capabilities": "capability"}.get(kind.group(2), kind.group(2)),
        "source": kind.group(1),
        "target_kind": _match(r"target_kind: (\w+)", s).group(1),
        "output_trust": _match(r"output_trust: (\w+)", s).group(1),
        "timeout_seconds": int(_match(r"a (\d+)-second timeout", s).group(1)),
    }


def ceilings() -> tuple[int, int]:
    """(discovery, one mutation) output ceilings in bytes."""
    s = LIFECYCLE_SENTENCE
    discovery = _bytes(_match(r"Discovery has a ([\d,]+)-byte output ceiling", s).group(1))
    mutation = _bytes(_match(r"one mutation has a ([\d,]+)-byte ceiling", s).group(1))
    return discovery, mutation


def lifecycle_expected() -> dict[str, dict[str, Any]]:
    discovery, mutation = ceilings()
    lines = LIFECYCLE_TABLE.strip().splitlines()
    header = lines[0].split()
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, line.split(), strict=True))
        name = cells["name"]
        rows[name] = {
            "name": name,
            **lifecycle_common(),
            "side_effect": cells["side_effect"],
            "risk": cells["risk"],
            "idempotency": ABBREVIATIONS.get(cells["idempotency"], cells["idempotency"]),
            "required_scopes": [cells["scope"]],
            "allow_parallel": cells["parallel"] == "true",
            "maximum_output_bytes": discovery if cells["side_effect"] == "none" else mutation,
        }
    return rows


def create_inputs() -> dict[str, set[str]]:
    """Each schedule.create version's closed input: the base fields, plus each later
    version's flag on top of the one before (1.2.0 use_website, 1.3.0 place_call)."""
    base = set(
        _match(
            r"(\w+) and (\w+) are always required, and exactly one of the compatible one-time"
            r" (\w+) field or a recurring (\w+) object",
            CREATE_INPUT_SENTENCE,
        ).groups()
    )
    first = _match(rf"Version {_VERSION} remains", VERSION_SENTENCES[1]).group(1)
    added = {first: ""}
    accepts = _match(rf"version {_VERSION} accepts (\w+)=true", VERSION_SENTENCES[0])
    added[accepts.group(1)] = accepts.group(2)
    flag = _match(rf"(\w+)=true \(version {_VERSION},", VERSION_SENTENCES[2])
    added[flag.group(2)] = flag.group(1)
    out: dict[str, set[str]] = {}
    current = set(base)
    for version in sorted(added, key=lambda v: tuple(int(p) for p in v.split("."))):
        if added[version]:
            current = current | {added[version]}
        out[version] = set(current)
    return out


def create_versions() -> tuple[str, ...]:
    return tuple(create_inputs())


def list_inputs() -> set[str]:
    found = _match(
        r"an optional (\w+) from 1 through (\d+).* optional opaque (\w+)\.", LIST_INPUT_SENTENCE
    )
    return {found.group(1), found.group(3)}


def list_maximum() -> int:
    return int(_match(r"from 1 through (\d+)", LIST_INPUT_SENTENCE).group(1))


def mutation_inputs() -> set[str]:
    return set(json.loads(MUTATION_INPUT_BLOCK))


def update_inputs() -> set[str]:
    patch = _match(r"At least one of (.+) is required", UPDATE_INPUT_SENTENCES[1]).group(1)
    fields = {f.strip() for f in re.split(r",\s*(?:or\s+)?|\s+or\s+", patch) if f.strip()}
    _match(r"the same stable identity fields plus a closed patch", UPDATE_INPUT_SENTENCES[0])
    return mutation_inputs() | fields


def approval_required(name: str) -> bool:
    """The spec's approval rule: creation's EXTERNAL_WRITE classification, and every
    lifecycle mutation (every lifecycle tool that is not the read-only listing)."""
    create_rule = _match(r"requires approval for its (\w+) classification", APPROVAL_SENTENCES[0])
    _match(r"requires approval for every lifecycle mutation", APPROVAL_SENTENCES[1])
    if name == "schedule.create":
        return bool(create_expected()["side_effect"] == create_rule.group(1).lower())
    row = lifecycle_expected().get(name)
    return row is not None and row["idempotency"] != "read_only"


# Kept for callers that read them as constants (parsed once at import).
DISCOVERY_BYTES, MUTATION_BYTES = ceilings()
CREATE_VERSIONS = create_versions()
CREATE_INPUT = create_inputs()
LIST_INPUT = list_inputs()
MUTATION_INPUT = mutation_inputs()
UPDATE_INPUT = update_inputs()


# ---------------------------------------------------------------- comparison


def open_objects(schema: Any, path: str = "$") -> list[str]:
    """Every object schema under ``schema`` that is not closed
    (``additionalProperties`` not false), by JSON path."""
    found: list[str] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
            found.append(path)
        for key, value in schema.items():
            if isinstance(value, dict):
                found += open_objects(value, f"{path}.{key}")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    found += open_objects(item, f"{path}.{key}[{i}]")
    return found


def classification_problems(spec: Any, expected: dict[str, Any]) -> list[str]:
    """Every field where the registered spec differs from the spec's table."""
    name = expected["name"]
    if spec is None:
        return [f"{name}: not registered"]
    actual = spec.classification()
    return [
        f"{name}@{spec.version}.{key}: registered {actual.get(key)!r}, spec says {want!r}"
        for key, want in expected.items()
        if actual.get(key) != want
    ]


def input_problems(spec: Any, properties: set[str]) -> list[str]:
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


def create_contract_problems(registry: Any) -> list[str]:
    expected = create_expected()
    versions_wanted = create_versions()
    inputs = create_inputs()
    problems: list[str] = []
    versions = [spec.version for spec in registry.versions("schedule.create")]
    if tuple(versions) != versions_wanted:
        problems.append(f"schedule.create versions {versions} are not {list(versions_wanted)}")
    for version in versions_wanted:
        tool = registry.get("schedule.create", version)
        spec = None if tool is None else tool.spec
        problems += classification_problems(spec, expected)
        if spec is not None:
            problems += input_problems(spec, inputs[version])
    newest = registry.get("schedule.create")
    if newest is not None and newest.spec.version != versions_wanted[-1]:
        problems.append(f"schedule.create advertises {newest.spec.version}")
    return problems


def lifecycle_contract_problems(registry: Any) -> list[str]:
    problems: list[str] = []
    inputs = {"schedule.list": list_inputs(), "schedule.update": update_inputs()}
    for name, expected in lifecycle_expected().items():
        tool = registry.get(name)
        problems += classification_problems(None if tool is None else tool.spec, expected)
        if tool is not None:
            problems += input_problems(tool.spec, inputs.get(name, mutation_inputs()))
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
