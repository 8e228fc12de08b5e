"""What the report says about milestones the suite does not verify uses ADR 2210's word,
"declared milestones", everywhere a reader sees it (the JSON keeps ``ledger`` in its
field names and in ``source``); a report written before the rename still verifies."""

from __future__ import annotations

import html
from typing import Any

import pytest

from reports.evaluate import UNKNOWN_NOTE, in_current_words
from reports.model import GateReport, Provenance, Requirements
from reports.render_html import render_html
from reports.render_junit import render_junit
from reports.render_markdown import render_markdown
from reports.verify import verify_report
from testsupport.reports import CATALOG, LEDGER, check, report_of


def _report() -> GateReport:
    # A bar the ceiling does not meet: JUnit's requirements case then gives the reason.
    report = report_of(
        [check("gate.schedule.civil_time", evidence={"examples": 3})],
        bar=Requirements(ceiling=11),
    )
    provenance = Provenance(
        catalog_sha256="c" * 64,
        ledger_sha256="d" * 64,
        ledger_shipped=True,
        checks_dir="src/gates/checks",
        check_files={},
        untracked=[],
        inventory=[],
    )
    return report.model_copy(
        update={"run": report.run.model_copy(update={"provenance": provenance})}
    )


def _without_statements(text: str) -> str:
    # A gate's statement is the spec's text ("preserves the record and ledger": the
    # occurrence ledger), not the report's own words.
    for gate in CATALOG:
        text = text.replace(gate.statement, "").replace(html.escape(gate.statement), "")
    return text


def _former_words(raw: dict[str, Any]) -> None:
    """Rewrite a report as the tool wrote it before ADR 2210's rename."""
    for m in raw["milestones"]:
        m["note"] = m["note"].replace(
            UNKNOWN_NOTE, "neither verified by this suite nor listed in the ledger"
        )
    raw["ceiling"]["reason"] = raw["ceiling"]["reason"].replace(
        "the declared milestones say", "the milestone ledger says"
    )


def _rewritten(report: GateReport, edit: Any) -> GateReport:
    raw = report.model_dump(mode="json")
    edit(raw)
    return GateReport.model_validate(raw)


def test_the_ceiling_is_held_by_what_the_declared_milestones_say() -> None:
    report = report_of([])
    assert report.ceiling.reason == "M10 is not complete: the declared milestones say in progress"
    unknown = next(m for m in report.milestones if m.source == "none")
    assert unknown.note == "neither verified by this suite nor in the declared milestones"


@pytest.mark.parametrize(
    "render", [render_markdown, render_html, render_junit], ids=["md", "html", "junit"]
)
def test_no_rendering_calls_the_declared_milestones_a_ledger(render: Any) -> None:
    text = _without_statements(render(_report()))
    assert "declared milestones say in progress" in text
    assert "ledger" not in text.lower(), [
        line for line in text.splitlines() if "ledger" in line.lower()
    ]


def test_the_check_above_sees_the_former_wording() -> None:
    # Test of the test: a report rendered from the former words is caught.
    former = _rewritten(_report(), _former_words)
    assert "ledger" in _without_statements(render_markdown(former)).lower()


def test_a_report_in_the_former_words_still_verifies() -> None:
    report = report_of([check("gate.schedule.civil_time")])
    former = _rewritten(report, _former_words)
    assert former.ceiling.reason.endswith("the milestone ledger says in progress")
    assert any("listed in the ledger" in m.note for m in former.milestones)
    assert verify_report(former, CATALOG, LEDGER) == []


def test_the_former_words_carry_no_other_claim() -> None:
    # Reading old words as new must not let a changed claim through: the ceiling's
    # reason saying "complete" where the declared milestones say "in progress".
    report = report_of([check("gate.schedule.civil_time")])

    def claims_complete(raw: dict[str, Any]) -> None:
        _former_words(raw)
        raw["ceiling"]["reason"] = raw["ceiling"]["reason"].replace("in progress", "complete")

    found = verify_report(_rewritten(report, claims_complete), CATALOG, LEDGER)
    assert any("ceiling" in p for p in found), found
    assert in_current_words("the milestone ledger says complete") == (
        "the declared milestones say complete"
    )
