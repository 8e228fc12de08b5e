"""``verify`` refuses any report whose claims do not follow from its checks."""

from collections.abc import Callable
from typing import Any

import pytest

from catalog import load_catalog
from catalog.milestones import load_milestones, parse_milestones
from reports.build import build_gate_results, build_report
from reports.model import CheckOutcome, CheckResult, GateReport
from reports.verify import verify_report
from testsupport.reports import run_metadata

CATALOG = load_catalog()
LEDGER = load_milestones(None, CATALOG.milestones())


def honest_report() -> GateReport:
    checks = {
        "gate.schedule.civil_time": [
            CheckResult(nodeid="a::ok", facet="check", outcome=CheckOutcome.PASSED)
        ],
        "gate.schedule.calendar_values": [
            CheckResult(nodeid="b::bad", facet="check", outcome=CheckOutcome.FAILED)
        ],
    }
    gates = build_gate_results(CATALOG, set(CATALOG.ids), checks, seed=3, profile="quick")
    run = run_metadata(seed=3).model_copy(update={"pytest_exit_code": 1})
    return build_report(CATALOG, LEDGER, gates, run)


def tamper(report: GateReport, edit: Callable[[dict[str, Any]], None]) -> GateReport:
    raw = report.model_dump(mode="json")
    edit(raw)
    return GateReport.model_validate(raw)


def gate(raw: dict[str, Any], gate_id: str) -> dict[str, Any]:
    return next(g for g in raw["gates"] if g["id"] == gate_id)


def test_an_honest_report_verifies() -> None:
    assert verify_report(honest_report(), CATALOG, LEDGER) == []


def _flip_failure_to_pass(raw: dict[str, Any]) -> None:
    gate(raw, "gate.schedule.calendar_values")["status"] = "PASS"


def _flip_missing_to_pass(raw: dict[str, Any]) -> None:
    gate(raw, "gate.schedule.no_overlap")["status"] = "PASS"


def _drop_a_gate(raw: dict[str, Any]) -> None:
    raw["gates"] = [g for g in raw["gates"] if g["id"] != "gate.schedule.no_overlap"]


def _add_a_gate(raw: dict[str, Any]) -> None:
    extra = dict(gate(raw, "gate.schedule.no_overlap"), id="gate.schedule.invented")
    raw["gates"].append(extra)


def _raise_the_ceiling(raw: dict[str, Any]) -> None:
    raw["ceiling"] = {"milestone": 11, "label": "M11", "held_by": 12, "reason": "trust me"}


def _drop_a_facet(raw: dict[str, Any]) -> None:
    g = gate(raw, "gate.schedule.not_early")
    g["facets"] = [f for f in g["facets"] if f["name"] != "materializer"]


def _fake_a_passing_check(raw: dict[str, Any]) -> None:
    gate(raw, "gate.schedule.calendar_values")["checks"][0]["outcome"] = "passed"


def _reword_a_statement(raw: dict[str, Any]) -> None:
    gate(raw, "gate.schedule.civil_time")["statement"] = "Anything goes."


def _complete_a_milestone(raw: dict[str, Any]) -> None:
    m11 = next(m for m in raw["milestones"] if m["number"] == 11)
    m11["state"] = "complete"


def _doctor_the_summary(raw: dict[str, Any]) -> None:
    raw["summary"]["PASS"] = 46


@pytest.mark.parametrize(
    "edit",
    [
        _flip_failure_to_pass,
        _flip_missing_to_pass,
        _drop_a_gate,
        _add_a_gate,
        _raise_the_ceiling,
        _drop_a_facet,
        _fake_a_passing_check,
        _reword_a_statement,
        _complete_a_milestone,
        _doctor_the_summary,
    ],
)
def test_a_tampered_report_is_refused(edit: Callable[[dict[str, Any]], None]) -> None:
    assert verify_report(tamper(honest_report(), edit), CATALOG, LEDGER) != []


def test_a_different_ledger_is_refused() -> None:
    generous = parse_milestones(
        "".join(f"[[milestone]]\nnumber = {n}\nstatus = 'complete'\n" for n in range(1, 11)),
        "generous",
        CATALOG.milestones(),
    )
    problems = verify_report(honest_report(), CATALOG, generous)
    assert any("milestone states" in p for p in problems)
