"""The gate report: a versioned, documented schema (see docs/report-format.md).

The JSON file is the source of truth; Markdown, JUnit XML and HTML are renderings
of it. ``scheduling-gates verify`` recomputes every derived field from the checks
recorded here and refuses a report whose claims do not follow from them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = "1.0"
SCHEMA_ID = "https://scheduling.invalid/schemas/gate-report/1.0/gate-report.schema.json"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class GateStatus(StrEnum):
    PASS = "PASS"  # noqa: S105 -- a status, not a password. Every facet has checks and every check passed
    FAIL = "FAIL"  # a check failed
    ERROR = "ERROR"  # a check could not run or did not cover its claim; harness broke
    MISSING = "MISSING"  # a facet has no bound check
    NOT_RUN = "NOT_RUN"  # filtered out of this run


class CheckOutcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # setup/teardown failure, not covered, or no result at all
    SKIPPED = "skipped"  # could not run: never counts as passing


class MilestoneState(StrEnum):
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # suite milestone with a gate not PASS
    IN_PROGRESS = "in_progress"
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"  # neither in the suite nor in the declared milestones


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CheckResult(_Model):
    nodeid: str
    facet: str
    outcome: CheckOutcome
    duration_s: float = 0.0
    detail: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


class FacetResult(_Model):
    name: str
    status: GateStatus
    checks: list[str]


class GateResult(_Model):
    id: str
    milestone: int
    kind: str
    title: str
    statement: str
    selected: bool
    status: GateStatus
    detail: str
    facets: list[FacetResult]
    checks: list[CheckResult]
    reproduce: str


class RuleResult(_Model):
    """A spec rule beyond the gates: same statuses, never part of the ceiling."""

    id: str
    section: str
    title: str
    statement: str
    selected: bool
    status: GateStatus
    detail: str
    checks: list[CheckResult]


class MilestoneResult(_Model):
    number: int
    source: Literal["suite", "ledger", "none"]  # "ledger": declared (the format's word)
    state: MilestoneState
    gates_total: int = 0
    gates_passing: int = 0
    note: str = ""


class Ceiling(_Model):
    milestone: int  # 0 means no milestone is verified
    label: str  # "M9", or "none"
    held_by: int | None  # the first milestone that is not complete
    reason: str


class PostgresInfo(_Model):
    source: str | None = None
    version: str | None = None
    durability: dict[str, str] = Field(default_factory=dict)
    error: str | None = None


class InventoryEntry(_Model):
    nodeid: str
    gate: str
    facet: str


class Provenance(_Model):
    """What decided the verdicts (see src/catalog/provenance.py)."""

    catalog_sha256: str
    ledger_sha256: str  # of the declared-milestones file ("ledger": the format's word)
    ledger_shipped: bool
    checks_dir: str  # relative to the project root, e.g. src/gates/checks
    check_files: dict[str, str]  # path relative to the project root -> SHA-256
    untracked: list[str] | None  # None: git was not available
    inventory: list[InventoryEntry]  # every bound check pytest collected
    # Added in 1.0 without a version bump (optional; verify refuses a report without
    # them): what ran besides the checks (src/reports/origin.py, ADR 2150).
    product_sha256: str | None = None  # the product tree, src/scheduling
    dependencies: list[str] | None = None  # sorted name==version of the environment
    dependencies_sha256: str | None = None


class ShardInfo(_Model):
    """Which part of a sharded run a partial report holds (``run --shard K/N``)."""

    index: int  # K, from 1
    total: int  # N
    checks: list[str]  # the node ids this shard ran (a deterministic 1/N of the bound checks)


class ShardRun(_Model):
    """One part a merged report was assembled from (``scheduling-gates merge``)."""

    index: int
    total: int
    checks: int  # how many bound checks the part ran
    started_at: datetime
    finished_at: datetime
    duration_s: float
    platform: str
    postgres: PostgresInfo
    command: str
    pytest_exit_code: int | None


class SensitivityRun(_Model):
    """What a ``scheduling-gates mutate`` result file says about itself."""

    finished_at: datetime | None  # None: the file predates dated results
    commit: str | None
    selection: list[str] | None  # mutant ids asked for; None: every shipped mutant
    killed: int
    total: int
    untargeted: list[str]  # gates and rules no mutant of that run targets
    not_killed: list[str]  # mutant ids whose verdict was not KILLED


class Sensitivity(_Model):
    """The latest sensitivity run the gate run found (src/gates/runner/sensitivity.py)."""

    path: str  # relative to the project root when inside it
    sha256: str | None = None
    run: SensitivityRun | None  # None: no (readable) result file
    note: str | None  # "no sensitivity run" when there is none


class RunMetadata(_Model):
    tool_version: str
    started_at: datetime
    finished_at: datetime
    duration_s: float
    commit: str | None
    commit_dirty: bool | None
    python: str
    platform: str
    tzdata: str | None
    postgres: PostgresInfo
    profile: Literal["quick", "deep"]
    seed: int
    ledger: str  # which declared-milestones file the run used
    selection: dict[str, list[str]]
    command: str
    pytest_exit_code: int | None
    provenance: Provenance | None = None
    # Added in 1.0 without a version bump (optional, defaulted): sharded runs (ADR 1710).
    shard: ShardInfo | None = None  # set on a partial report: verify refuses it, merge takes it
    shards: list[ShardRun] = Field(default_factory=list)  # set on a merged report
    sensitivity: Sensitivity | None = None


class Requirements(_Model):
    """The bar a run was held to (``--require-ceiling`` / ``--require-complete``)."""

    ceiling: int | None = None  # the required ceiling, or None when not set
    complete: list[int] = Field(default_factory=list)  # milestones that had to be complete
    met: bool | None = None  # None when no bar was set

    @property
    def is_set(self) -> bool:
        return self.ceiling is not None or bool(self.complete)


def _schema_ids(schema: dict[str, Any]) -> None:
    """The schema names its dialect and itself, and a report must say its version."""
    schema["$schema"] = JSON_SCHEMA_DIALECT
    schema["$id"] = SCHEMA_ID
    required = schema.setdefault("required", [])
    if "schema_version" not in required:
        required.insert(0, "schema_version")


class GateReport(_Model):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_schema_ids)

    schema_version: Literal["1.0"]
    run: RunMetadata
    ceiling: Ceiling
    milestones: list[MilestoneResult]
    gates: list[GateResult]
    summary: dict[str, int]
    # Added in 1.0 without a version bump (optional, defaulted): older reports still load.
    requirements: Requirements = Field(default_factory=Requirements)
    rules: list[RuleResult] = Field(default_factory=list)
