"""The runner against a scratch check directory: statuses, files, exit code, verify."""

import json
import textwrap
from pathlib import Path

import pytest

from catalog import load_catalog
from catalog.milestones import load_milestones
from gates.runner import RunOptions, run_gates
from reports.model import GateReport, GateStatus
from reports.verify import verify_report

CHECKS = textwrap.dedent(
    """
    import pytest

    @pytest.mark.gate("gate.schedule.civil_time")
    def test_passes(gate_evidence):
        gate_evidence.record("examples", 3)
        assert 1 + 1 == 2

    @pytest.mark.gate("gate.schedule.calendar_values")
    def test_fails():
        assert 1 + 1 == 3

    @pytest.mark.gate("gate.schedule.domain_invariants")
    def test_cannot_run():
        pytest.skip("needs something absent")

    @pytest.mark.gate("gate.schedule.calendar_recurrence")
    def test_not_covered(gate_evidence):
        gate_evidence.not_covered("declared step never reached")

    @pytest.mark.gate("gate.schedule.not_early", facet="calculator")
    def test_one_facet_only():
        pass

    @pytest.mark.gate("gate.schedule.misfire_bounded", facet="calculator")
    def test_unselected():
        pass
    """
)
SELECTED = [
    "gate.schedule.civil_time",
    "gate.schedule.calendar_values",
    "gate.schedule.domain_invariants",
    "gate.schedule.calendar_recurrence",
    "gate.schedule.not_early",
    "gate.schedule.no_overlap",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[GateReport, int, Path]:
    root = tmp_path_factory.mktemp("gate-run")
    checks = root / "checks"
    checks.mkdir()
    (checks / "test_scratch.py").write_text(CHECKS)
    out = root / "out"
    report, code = run_gates(RunOptions(checks_dir=checks, output=out, gates=SELECTED, seed=7))
    return report, code, out


def test_each_status_follows_from_its_checks(run: tuple[GateReport, int, Path]) -> None:
    report, _, _ = run
    status = {g.id: g.status for g in report.gates}
    assert status["gate.schedule.civil_time"] == GateStatus.PASS
    assert status["gate.schedule.calendar_values"] == GateStatus.FAIL
    assert status["gate.schedule.domain_invariants"] == GateStatus.ERROR
    assert status["gate.schedule.calendar_recurrence"] == GateStatus.ERROR
    assert status["gate.schedule.not_early"] == GateStatus.MISSING  # materializer facet unbound
    assert status["gate.schedule.no_overlap"] == GateStatus.MISSING  # selected, nothing bound
    assert status["gate.schedule.misfire_bounded"] == GateStatus.NOT_RUN
    assert len(report.gates) == 46
    civil = next(g for g in report.gates if g.id == "gate.schedule.civil_time")
    assert civil.checks[0].evidence == {"examples": 3}
    recurrence = next(g for g in report.gates if g.id == "gate.schedule.calendar_recurrence")
    assert "not covered: declared step never reached" in (recurrence.checks[0].detail or "")


def test_writes_four_files_and_fails_the_exit_code(run: tuple[GateReport, int, Path]) -> None:
    report, code, out = run
    assert code == 1
    assert sorted(p.name for p in out.iterdir()) == [
        "gate-report.html",
        "gate-report.json",
        "gate-report.md",
        "junit.xml",
    ]
    markdown = (out / "gate-report.md").read_text()
    order = ["Verified gate ceiling: M9", "bar set", "**Milestones**", "not passing", "passing ("]
    positions = [markdown.index(text) for text in order]
    assert positions == sorted(positions)
    assert "scheduling-gates run --gate gate.schedule.calendar_values --seed 7" in markdown
    junit = (out / "junit.xml").read_text()
    assert junit.count("<testcase ") == 46
    assert 'classname="scheduling-gates.M11"' in junit
    assert "<script" not in (out / "gate-report.html").read_text()
    assert report.run.seed == 7
    assert report.run.profile == "quick"


def test_the_written_report_verifies(run: tuple[GateReport, int, Path]) -> None:
    _, _, out = run
    report = GateReport.model_validate(json.loads((out / "gate-report.json").read_text()))
    catalog = load_catalog()
    assert verify_report(report, catalog, load_milestones(None, catalog.milestones())) == []


def test_require_ceiling_is_the_exit_condition(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    base = RunOptions(checks_dir=checks, output=tmp_path / "o", seed=1)
    base.require_ceiling = 9
    assert run_gates(base)[1] == 0
    base.require_ceiling = 11
    assert run_gates(base)[1] == 1


def test_a_broken_check_module_makes_selected_gates_error(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "test_broken.py").write_text("import nonexistent_module_xyz\n")
    report, code = run_gates(
        RunOptions(checks_dir=checks, output=tmp_path / "o", gates=["gate.schedule.no_overlap"])
    )
    gate = next(g for g in report.gates if g.id == "gate.schedule.no_overlap")
    assert gate.status == GateStatus.ERROR
    assert code == 1
    assert "nonexistent_module_xyz" in (gate.checks[0].detail or "")


def test_cli_verify_accepts_the_report_and_refuses_a_tampered_copy(
    run: tuple[GateReport, int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gates.runner.cli import main

    _, _, out = run
    assert main(["verify", str(out / "gate-report.json")]) == 0
    raw = json.loads((out / "gate-report.json").read_text())
    for g in raw["gates"]:
        g["status"] = "PASS"
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(raw))
    assert main(["verify", str(forged)]) == 1
    assert "contradicts its checks" in capsys.readouterr().err


def test_require_complete_names_milestones_that_must_be_complete(tmp_path: Path) -> None:
    checks = tmp_path / "checks"
    checks.mkdir()
    options = RunOptions(checks_dir=checks, output=tmp_path / "o", seed=1, require_complete=[9])
    assert run_gates(options)[1] == 0
    options.require_complete = [9, 11]  # nothing is bound: M11 is incomplete
    assert run_gates(options)[1] == 1
    options.require_ceiling, options.require_complete = 9, [10]  # M10 is in progress
    assert run_gates(options)[1] == 1
