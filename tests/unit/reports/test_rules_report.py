"""The rules section: statuses follow from checks like a one-facet gate, never move the
ceiling, render in each report, and ``verify`` refuses a flipped rule status."""

from __future__ import annotations

from catalog import load_catalog
from catalog.milestones import load_milestones
from catalog.rules import load_rules
from reports.build import build_gate_results, build_report, build_rule_results
from reports.model import (
    CheckOutcome,
    CheckResult,
    GateReport,
    GateStatus,
)
from reports.render_html import render_html
from reports.render_markdown import render_markdown
from reports.verify import verify_report
from testsupport.reports import run_metadata

CATALOG = load_catalog()
LEDGER = load_milestones(None, CATALOG.milestones())
RULES = load_rules()
LOCK = "rule.admission.tenant_lock"


RUN = run_metadata(seed=3)


def with_rules(outcome: CheckOutcome) -> GateReport:
    checks = {LOCK: [CheckResult(nodeid="r::lock", facet="check", outcome=outcome)]}
    rules = build_rule_results(RULES, True, checks)
    gates = build_gate_results(CATALOG, set(CATALOG.ids), {}, seed=3, profile="quick")
    return build_report(CATALOG, LEDGER, gates, RUN, rules=rules)


def test_rule_statuses_follow_from_checks_and_not_the_ceiling() -> None:
    failing = with_rules(CheckOutcome.FAILED)
    passing = with_rules(CheckOutcome.PASSED)
    status = {r.id: r.status for r in failing.rules}
    assert status[LOCK] is GateStatus.FAIL
    assert status["rule.claim.skip_locked"] is GateStatus.MISSING
    assert {r.id: r.status for r in passing.rules}[LOCK] is GateStatus.PASS
    assert failing.ceiling == passing.ceiling
    assert verify_report(failing, CATALOG, LEDGER) == []


def test_every_rendering_has_the_rules_section() -> None:
    report = with_rules(CheckOutcome.PASSED)
    assert "## Spec rules beyond the gates" in render_markdown(report)
    assert f"`{LOCK}`" in render_markdown(report)
    assert "Spec rules beyond the gates" in render_html(report)


def test_verify_refuses_a_flipped_rule_status() -> None:
    report = with_rules(CheckOutcome.FAILED)
    raw = report.model_dump(mode="json")
    next(r for r in raw["rules"] if r["id"] == LOCK)["status"] = "PASS"
    flipped = type(report).model_validate(raw)
    problems = verify_report(flipped, CATALOG, LEDGER)
    assert any(LOCK in p for p in problems), problems
