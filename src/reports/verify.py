"""Recompute a report's derived claims from its recorded checks and refuse any mismatch."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError as PydanticValidationError

from catalog import Catalog
from catalog.milestones import Milestones
from catalog.rules import load_rules
from reports.build import rule_status, summarize
from reports.evaluate import (
    compute_ceiling,
    evaluate_facets,
    gate_status,
    in_current_words,
    milestone_results,
    requirements_met,
)
from reports.model import GateReport
from reports.provenance_check import VerifyContext, provenance_problems


def load_report(path: Path) -> tuple[GateReport | None, list[str]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, [f"cannot read {path}: {exc}"]
    try:
        return GateReport.model_validate(raw), []
    except PydanticValidationError as exc:
        return None, [f"not a valid gate report (schema 1.0): {exc}"]


def verify_report(
    report: GateReport,
    catalog: Catalog,
    declared: Milestones,
    context: VerifyContext | None = None,
) -> list[str]:
    """Every way the report contradicts the catalog, the declared milestones or its own
    checks; with a ``context``, also its provenance (and a checkout, when the context
    names one)."""
    problems: list[str] = []
    shard = report.run.shard
    if shard is not None:
        return [
            f"a partial report (shard {shard.index}/{shard.total}): its statuses cover only"
            " its own checks; merge every part with `scheduling-gates merge` and verify that"
        ]
    if context is not None:
        problems += provenance_problems(report, catalog, context)
    seen = [g.id for g in report.gates]
    for gate_id in catalog.ids:
        if gate_id not in seen:
            problems.append(f"{gate_id}: catalog gate absent from the report")
    for gate_id in seen:
        if gate_id not in catalog:
            problems.append(f"{gate_id}: not a catalog gate")
    if len(seen) != len(set(seen)):
        problems.append("a gate appears more than once")
    statuses = {}
    for result in report.gates:
        if result.id not in catalog:
            continue
        gate = catalog.get(result.id)
        statuses[gate.id] = result.status
        if (result.milestone, result.kind, result.statement) != (
            gate.milestone,
            gate.kind.value,
            gate.statement,
        ):
            problems.append(f"{gate.id}: milestone, kind or statement differs from the catalog")
        stray = [c.nodeid for c in result.checks if c.facet not in gate.facets]
        if stray:
            problems.append(f"{gate.id}: checks bound to unknown facets: {stray}")
        if not result.selected and result.checks:
            problems.append(f"{gate.id}: not selected but carries check results")
        facets = evaluate_facets(gate, result.checks)
        if facets != result.facets:
            problems.append(f"{gate.id}: facet statuses do not follow from its checks")
        expected, _ = gate_status(result.selected, facets)
        if expected != result.status:
            problems.append(
                f"{gate.id}: status {result.status.value} contradicts its checks "
                f"(they give {expected.value})"
            )
    if problems:
        return problems
    milestones = milestone_results(catalog, statuses, declared)
    worded = _in_current_words(report)
    if milestones != worded.milestones:
        problems.append("milestone states do not follow from the gates and the declared milestones")
    ceiling = compute_ceiling(milestones)
    if ceiling != worded.ceiling:
        problems.append(
            f"ceiling {report.ceiling.label} is wrong: "
            f"the gates and the declared milestones give {ceiling.label}"
        )
    if summarize(report.gates) != report.summary:
        problems.append("summary counts do not match the gates")
    if requirements_met(report.requirements, ceiling, milestones) != report.requirements.met:
        problems.append("requirements.met does not follow from the bar and the milestones")
    return problems + rule_problems(report)


def _in_current_words(report: GateReport) -> GateReport:
    """The report with the notes and ceiling reason of a report made before the rename
    of the milestone ledger (ADR 2210) in today's words: the claims are the same."""
    milestones = [
        m.model_copy(update={"note": in_current_words(m.note)}) for m in report.milestones
    ]
    ceiling = report.ceiling.model_copy(update={"reason": in_current_words(report.ceiling.reason)})
    return report.model_copy(update={"milestones": milestones, "ceiling": ceiling})


def rule_problems(report: GateReport) -> list[str]:
    """Rules: each a catalog rule, its status following from its checks."""
    rules = load_rules()
    problems = []
    ids = [r.id for r in report.rules]
    if report.rules and ids != list(rules):
        problems.append("the report's rules are not the rules catalog's")
    for result in report.rules:
        rule = rules.get(result.id)
        if rule is None:
            continue
        if result.statement != rule.statement:
            problems.append(f"{rule.id}: statement differs from the rules catalog")
        if not result.selected and result.checks:
            problems.append(f"{rule.id}: not selected but carries check results")
        expected, _ = rule_status(result.selected, result.checks)
        if expected != result.status:
            problems.append(
                f"{rule.id}: status {result.status.value} contradicts its checks "
                f"(they give {expected.value})"
            )
    return problems
