"""Assemble a GateReport from the catalog, the declared milestones and the checks' results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from catalog import Catalog
from catalog.milestones import Milestones
from catalog.rules import Rule
from reports.evaluate import (
    compute_ceiling,
    evaluate_facets,
    facet_status,
    gate_status,
    milestone_results,
    requirements_met,
)
from reports.model import (
    SCHEMA_VERSION,
    CheckResult,
    FacetResult,
    GateReport,
    GateResult,
    GateStatus,
    Requirements,
    RuleResult,
    RunMetadata,
)


def reproduce_command(gate_id: str, seed: int, profile: str) -> str:
    return f"scheduling-gates run --gate {gate_id} --seed {seed} --profile {profile}"


def build_gate_results(
    catalog: Catalog,
    selected: set[str],
    checks_by_gate: Mapping[str, Sequence[CheckResult]],
    seed: int,
    profile: str,
) -> list[GateResult]:
    """One result per catalog gate, in catalog order."""
    results = []
    for gate in catalog:
        is_selected = gate.id in selected
        checks = list(checks_by_gate.get(gate.id, [])) if is_selected else []
        facets = evaluate_facets(gate, checks)
        status, detail = gate_status(is_selected, facets)
        results.append(
            GateResult(
                id=gate.id,
                milestone=gate.milestone,
                kind=gate.kind.value,
                title=gate.title,
                statement=gate.statement,
                selected=is_selected,
                status=status,
                detail=detail,
                facets=facets,
                checks=checks,
                reproduce=reproduce_command(gate.id, seed, profile),
            )
        )
    return results


def summarize(gates: Sequence[GateResult]) -> dict[str, int]:
    counts = Counter(g.status for g in gates)
    return {s.value: counts.get(s, 0) for s in GateStatus}


def build_report(
    catalog: Catalog,
    declared: Milestones,
    gates: list[GateResult],
    run: RunMetadata,
    requirements: Requirements | None = None,
    rules: list[RuleResult] | None = None,
) -> GateReport:
    milestones = milestone_results(catalog, {g.id: g.status for g in gates}, declared)
    ceiling = compute_ceiling(milestones)
    bar = requirements or Requirements()
    return GateReport(
        schema_version=SCHEMA_VERSION,
        run=run,
        ceiling=ceiling,
        milestones=milestones,
        gates=gates,
        summary=summarize(gates),
        requirements=bar.model_copy(update={"met": requirements_met(bar, ceiling, milestones)}),
        rules=rules or [],
    )


def build_rule_results(
    rules: Mapping[str, Rule],
    selected: bool,
    checks_by_id: Mapping[str, Sequence[CheckResult]],
) -> list[RuleResult]:
    """One result per catalog rule (statuses as for a one-facet gate)."""
    results = []
    for rule in rules.values():
        checks = list(checks_by_id.get(rule.id, [])) if selected else []
        status, detail = rule_status(selected, checks)
        results.append(
            RuleResult(
                id=rule.id,
                section=rule.section,
                title=rule.title,
                statement=rule.statement,
                selected=selected,
                status=status,
                detail=detail,
                checks=checks,
            )
        )
    return results


def rule_status(selected: bool, checks: Sequence[CheckResult]) -> tuple[GateStatus, str]:
    facet = FacetResult(name="check", status=facet_status(checks), checks=[])
    return gate_status(selected, [facet])
