"""Build small, honest gate reports for the rendering, diff and CLI tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from catalog import load_catalog
from catalog.milestones import load_milestones
from reports.build import build_gate_results, build_report
from reports.model import (
    CheckOutcome,
    CheckResult,
    GateReport,
    PostgresInfo,
    Requirements,
    RunMetadata,
)

CATALOG = load_catalog()
LEDGER = load_milestones(None, CATALOG.milestones())
WHEN = datetime(2026, 11, 30, tzinfo=UTC)


def run_metadata(seed: int = 3) -> RunMetadata:
    return RunMetadata(
        tool_version="0",
        started_at=WHEN,
        finished_at=WHEN,
        duration_s=1.5,
        commit="abc123",
        commit_dirty=False,
        python="3.11",
        platform="test",
        tzdata="2026f",
        postgres=PostgresInfo(source="local", version="15"),
        profile="quick",
        seed=seed,
        ledger=LEDGER.origin,
        selection={"gates": [], "milestones": []},
        command="scheduling-gates run",
        pytest_exit_code=0,
    )


def check(
    gate_id: str,
    outcome: CheckOutcome = CheckOutcome.PASSED,
    evidence: Mapping[str, Any] | None = None,
    name: str = "test_it",
    detail: str | None = None,
) -> tuple[str, CheckResult]:
    facet = CATALOG.get(gate_id).facets[0]
    nodeid = f"src/gates/checks/test_x.py::{name}[{gate_id}]"
    result = CheckResult(
        nodeid=nodeid, facet=facet, outcome=outcome, evidence=dict(evidence or {}), detail=detail
    )
    return gate_id, result


def report_of(
    checks: Sequence[tuple[str, CheckResult]],
    *,
    every_facet_passes: bool = False,
    bar: Requirements | None = None,
    seed: int = 3,
) -> GateReport:
    """A report with the given checks; ``every_facet_passes`` binds a passing check to
    every other facet of every gate (a fully green suite)."""
    by_gate: dict[str, list[CheckResult]] = {}
    for gate_id, result in checks:
        by_gate.setdefault(gate_id, []).append(result)
    if every_facet_passes:
        for gate in CATALOG:
            have = {c.facet for c in by_gate.get(gate.id, [])}
            for facet in gate.facets:
                if facet not in have:
                    by_gate.setdefault(gate.id, []).append(
                        CheckResult(
                            nodeid=f"src/gates/checks/test_all.py::test_{facet}[{gate.id}]",
                            facet=facet,
                            outcome=CheckOutcome.PASSED,
                            evidence={"examples": 10},
                        )
                    )
    gates = build_gate_results(CATALOG, set(CATALOG.ids), by_gate, seed=seed, profile="quick")
    return build_report(CATALOG, LEDGER, gates, run_metadata(seed), bar)
