"""junit.xml validates against the common JUnit schema and is red where the run is red."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from reports.model import CheckOutcome, GateReport, GateStatus, Requirements
from reports.render_junit import render_junit
from testsupport.reports import CATALOG, check, report_of

XSD = Path(os.environ.get("JUNIT_XSD", Path(__file__).with_name("junit.xsd")))
SCHEMA = xmlschema.XMLSchema(str(XSD))

CIVIL = "gate.schedule.civil_time"
VALUES = "gate.schedule.calendar_values"


def _cases(xml: str) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.fromstring(xml).iter("testcase")}


def _kind(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


@pytest.mark.parametrize(
    "bar", [None, Requirements(ceiling=9), Requirements(ceiling=9, complete=[11])]
)
def test_junit_is_valid_with_one_case_per_gate(bar: Requirements | None) -> None:
    report = report_of([check(CIVIL), check(VALUES, CheckOutcome.FAILED, detail="boom")], bar=bar)
    xml = render_junit(report)
    SCHEMA.validate(xml)
    cases = _cases(xml)
    assert set(CATALOG.ids) <= set(cases)
    assert len(cases) == len(CATALOG.ids) + (1 if bar else 0)
    assert not any(c.find("properties") is not None for c in cases.values())


def test_schema_rejects_properties_inside_a_testcase() -> None:
    """The test of the test: the old rendering (properties per case) is refused."""
    bad = (
        "<testsuite name='s' tests='1' failures='0' errors='0'><testcase name='g'>"
        "<properties><property name='a' value='b'/></properties></testcase></testsuite>"
    )
    assert not SCHEMA.is_valid(bad)


def test_without_a_bar_every_gate_not_passing_is_red() -> None:
    report = report_of([check(CIVIL), check(VALUES, CheckOutcome.ERROR)])
    cases = _cases(render_junit(report))
    assert _kind(cases[CIVIL]) == "passed"
    assert _kind(cases[VALUES]) == "error"
    missing = [g.id for g in report.gates if g.status == GateStatus.MISSING]
    assert missing
    assert all(_kind(cases[g]) == "failure" for g in missing)
    failure = cases[missing[0]].find("failure")
    assert failure is not None
    assert "pytest.mark.gate" in (failure.get("message") or "")


def test_with_a_bar_missing_gates_it_covers_fail_and_the_rest_skip() -> None:
    report = report_of([check(CIVIL)], bar=Requirements(ceiling=9, complete=[11]))
    cases = _cases(render_junit(report))
    by_id = {g.id: g for g in report.gates}
    for gate_id, case in cases.items():
        if gate_id == "requirements":
            continue
        gate = by_id[gate_id]
        if gate.status == GateStatus.MISSING:
            assert _kind(case) == ("failure" if gate.milestone == 11 else "skipped"), gate_id
    assert _kind(cases["requirements"]) == "failure"
    assert report.requirements.met is False


def test_a_met_bar_is_a_passing_requirements_case_and_suite_counts_add_up() -> None:
    report = report_of([], every_facet_passes=True, bar=Requirements(ceiling=9))
    xml = render_junit(report)
    SCHEMA.validate(xml)
    assert report.requirements.met is True
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("0", "0")
    assert _kind(_cases(xml)["requirements"]) == "passed"


def test_json_schema_names_itself_and_requires_its_version() -> None:
    schema = GateReport.model_json_schema()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["$id"].endswith("gate-report.schema.json")
    assert "schema_version" in schema["required"]
