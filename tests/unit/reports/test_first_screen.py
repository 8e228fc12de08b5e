"""The first screen's content: milestone ranges, the bar, what to do, evidence lines."""

from __future__ import annotations

from reports.first_screen import (
    evidence_summary,
    milestone_lines,
    replay_commands,
    sections_of,
)
from reports.model import CheckOutcome, GateStatus, Requirements
from reports.render_markdown import render_markdown
from testsupport.reports import check, report_of


def test_declared_milestones_collapse_into_ranges_and_suite_ones_stay() -> None:
    texts = [m.text for m in milestone_lines(report_of([]).milestones)]
    assert texts[0] == "M1\u2013M9 complete (declared)"
    assert texts[1] == "M10 in progress (declared)"
    assert texts[2].startswith("M11 incomplete: 0 of 23 gates pass")
    assert "M13\u2013M18 unknown (not in the suite or the declared milestones)" in texts
    assert len(texts) < 12  # 23 milestones, a handful of lines


def test_evidence_is_one_summary_line_and_a_replay_command() -> None:
    evidence = {
        "race.scenario": "lifecycle.race",
        "race.mode": "random",
        "race.seed": 5,
        "race.executions": 20,
        "race.interleavings_explored": 20,
        "crash": {"scenario": "lifecycle.crash", "mode": "crash", "seed": 5, "executions": 27},
        "crash_interleavings": {"interleavings_explored": 27},
        "examples": 45,
        "zones_swept": 597,
        "seed": 123456,
    }
    assert evidence_summary(evidence) == (
        "47 interleavings · 45 examples · 27 crash points · 597 zones"
    )
    assert replay_commands(evidence) == [
        "scheduling-sim run --scenario lifecycle.race --mode random --seed 5 --executions 20"
        " --trace race.json",
        "scheduling-sim run --scenario lifecycle.crash --mode crash --seed 5 --trace race.json",
    ]


def test_not_passing_first_worst_first_with_what_to_do() -> None:
    report = report_of(
        [
            check("gate.schedule.civil_time", CheckOutcome.FAILED, detail="fold picked later"),
            check("gate.schedule.calendar_values", CheckOutcome.ERROR),
        ]
    )
    section = sections_of(report)[0]
    assert [i.status for i in section.not_passing[:2]] == [GateStatus.FAIL, GateStatus.ERROR]
    assert "scheduling-gates run --gate gate.schedule.civil_time" in section.not_passing[0].todo
    assert "fold picked later" in section.not_passing[0].todo
    missing = next(i for i in section.not_passing if i.id == "gate.schedule.not_early")
    assert '@pytest.mark.gate("gate.schedule.not_early", facet="calculator")' in missing.todo


def test_markdown_reads_in_first_screen_order() -> None:
    report = report_of(
        [check("gate.schedule.civil_time", evidence={"examples": 3})],
        bar=Requirements(ceiling=9, complete=[11]),
    )
    md = render_markdown(report)
    order = [
        "Verified gate ceiling: M9",
        "NOT MET: M11 is incomplete",
        "M1\u2013M9 complete (declared)",
        "## Gates not passing (45 of 46)",
        "## Gates passing (1)",
        "`gate.schedule.civil_time`",
        "3 examples",
        "<details><summary>raw evidence</summary>",
    ]
    positions = [md.index(text) for text in order]
    assert positions == sorted(positions)
