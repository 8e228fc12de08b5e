"""``scheduling-gates diff``: regression, no change, improvement (and the exit code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reports.diff import diff_reports, render_diff_markdown
from reports.model import CheckOutcome, GateReport
from testsupport.reports import check, report_of

CIVIL = "gate.schedule.civil_time"
VALUES = "gate.schedule.calendar_values"
SCRIPT = Path(sys.executable).with_name("scheduling-gates")


def _green(examples: int = 50, crash_points: int = 20) -> GateReport:
    evidence = {"examples": examples, "seed": 1, "crash": {"executions": crash_points}}
    return report_of([check(CIVIL, evidence=evidence)], every_facet_passes=True)


def _cli(
    tmp_path: Path, old: GateReport, new: GateReport, fmt: str
) -> subprocess.CompletedProcess[str]:
    paths = []
    for name, report in (("old.json", old), ("new.json", new)):
        path = tmp_path / name
        path.write_text(report.model_dump_json(), encoding="utf-8")
        paths.append(str(path))
    return subprocess.run(
        [str(SCRIPT), "diff", *paths, "--format", fmt], capture_output=True, text=True, check=False
    )


def test_no_change_is_exit_0(tmp_path: Path) -> None:
    diff = diff_reports(_green(), _green())
    assert diff.unchanged
    assert diff.regressions == 0
    proc = _cli(tmp_path, _green(), _green(), "markdown")
    assert proc.returncode == 0, proc.stderr
    assert "No change" in proc.stdout


def test_regression_names_status_ceiling_check_and_evidence(tmp_path: Path) -> None:
    old = _green(examples=50, crash_points=20)
    # civil_time now fails with less evidence; calendar_values loses its check (MISSING).
    failing = report_of(
        [check(CIVIL, CheckOutcome.FAILED, evidence={"examples": 10, "crash": {"executions": 3}})],
        every_facet_passes=True,
    )
    raw = failing.model_dump(mode="json")
    values = next(g for g in raw["gates"] if g["id"] == VALUES)
    gone = values["checks"][0]["nodeid"]
    values["checks"], values["status"] = [], "MISSING"
    # The default ledger pins the ceiling at M9; a run under another ledger may drop it.
    raw["ceiling"] = {"milestone": 8, "label": "M8", "held_by": 9, "reason": "M9 is not complete"}
    new = GateReport.model_validate(raw)
    diff = diff_reports(old, new)
    assert [(s.gate, s.old, s.new) for s in diff.statuses] == [
        (CIVIL, "PASS", "FAIL"),
        (VALUES, "PASS", "MISSING"),
    ]
    assert all(s.regression for s in diff.statuses)
    assert [(c.nodeid, c.change) for c in diff.checks] == [(gone, "removed")]
    shrunk = {(e.key, e.old, e.new) for e in diff.evidence}
    assert shrunk == {("examples", 50, 10), ("crash.executions", 20, 3)}  # never the seed
    assert diff.ceiling_moved < 0
    assert diff.regressions == 2 + 1 + 2 + 1
    proc = _cli(tmp_path, old, new, "markdown")
    assert proc.returncode == 1
    assert "regression" in proc.stdout
    assert f"`{CIVIL}` | PASS | FAIL" in proc.stdout
    assert "Ceiling went DOWN" in proc.stdout
    as_json = json.loads(_cli(tmp_path, old, new, "json").stdout)
    assert as_json["regressions"] == diff.regressions


def test_improvement_is_exit_0_and_says_better(tmp_path: Path) -> None:
    old = report_of([check(CIVIL), check(VALUES, CheckOutcome.FAILED)])
    new = report_of([check(CIVIL), check(VALUES)], every_facet_passes=True)
    diff = diff_reports(old, new)
    assert diff.regressions == 0
    assert diff.statuses
    assert not any(s.regression for s in diff.statuses)
    assert any(c.change == "added" for c in diff.checks)
    proc = _cli(tmp_path, old, new, "text")
    assert proc.returncode == 0, proc.stdout
    assert "better" in proc.stdout
    assert "no regressions" in proc.stdout
    assert "No regressions" in render_diff_markdown(diff)


def test_unreadable_report_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    proc = subprocess.run(
        [str(SCRIPT), "diff", str(bad), str(tmp_path / "absent.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "bad.json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_small_shrink_between_different_seeds_is_listed_not_a_regression() -> None:
    def run(examples: int, seed: int) -> GateReport:
        evidence = {"examples": examples}
        return report_of([check(CIVIL, evidence=evidence)], every_facet_passes=True, seed=seed)

    varied = diff_reports(run(204, seed=1), run(200, seed=2))
    assert [(e.old, e.new, e.regression) for e in varied.evidence] == [(204, 200, False)]
    assert varied.regressions == 0
    assert diff_reports(run(204, seed=1), run(150, seed=2)).regressions == 1
    assert diff_reports(run(204, seed=1), run(200, seed=1)).regressions == 1
