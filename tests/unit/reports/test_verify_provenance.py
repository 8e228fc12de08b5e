"""``verify`` refuses each fabrication of issue 12 (a test per case), and accepts the
honest report of a real run over a scratch checkout (git repository with the shipped
catalog and milestone file and one check file)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import textwrap
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from catalog import load_catalog
from catalog.milestones import load_milestones
from gates.runner import RunOptions, run_gates
from gates.runner.cli import main
from reports.model import GateReport
from reports.provenance_check import VerifyContext
from reports.verify import verify_report
from testsupport.git import git

CATALOG = load_catalog()
SHIPPED = load_milestones(None, CATALOG.milestones())
CHECKS = textwrap.dedent(
    """
    import pytest

    CIVIL = "gate.schedule.civil_time"

    @pytest.mark.gate(CIVIL)
    def test_passes():
        assert 1 + 1 == 2

    @pytest.mark.gate("gate.schedule.calendar_values")
    def test_fails():
        assert 1 + 1 == 3

    @pytest.mark.rule("rule.purge.terminal")
    def test_a_rule_check():
        pass
    """
)
SELECTED = ["gate.schedule.civil_time", "gate.schedule.calendar_values", "gate.schedule.no_overlap"]
CUSTOM_LEDGER = "\n".join(
    f'[[milestone]]\nnumber = {n}\nstatus = "complete"\nsource = "invented"\n'
    for n in range(1, 24)
    if n not in CATALOG.milestones()
)


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkout")
    gates_dir = root / "src" / "gates"
    (gates_dir / "checks").mkdir(parents=True)
    shipped = Path(str(resources.files("catalog")))
    (root / "src" / "catalog").mkdir()
    for name in ("catalog.toml", "milestones.toml"):
        shutil.copy(shipped / name, root / "src" / "catalog" / name)
    (gates_dir / "checks" / "test_scratch.py").write_text(CHECKS)
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = ["--import-mode=importlib"]\n'
    )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "scratch")
    return root


def run_in(checkout: Path, out: Path, ledger: Path | None = None) -> dict[str, Any]:
    argv = ["run", *(a for g in SELECTED for a in ("--gate", g))]
    run_gates(
        RunOptions(
            checks_dir=checkout / "src" / "gates" / "checks",
            output=out,
            gates=SELECTED,
            seed=5,
            milestone_file=ledger,
            command="scheduling-gates " + " ".join(argv),
        )
    )
    raw: dict[str, Any] = json.loads((out / "gate-report.json").read_text())
    return raw


@pytest.fixture(scope="module")
def honest(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return run_in(checkout, tmp_path_factory.mktemp("out"))


def problems(
    raw: dict[str, Any],
    checkout: Path | None = None,
    ledger: Path | None = None,
    *,
    allow_dirty: bool = False,
) -> list[str]:
    report = GateReport.model_validate(raw)
    used = load_milestones(ledger, CATALOG.milestones())
    context = VerifyContext(
        milestones_path=ledger,
        shipped_milestones_origin=SHIPPED.origin,
        checkout=checkout,
        allow_dirty=allow_dirty,
    )
    return verify_report(report, CATALOG, used, context)


def edited(raw: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(raw))
    edit(copy)
    return copy


def gate(raw: dict[str, Any], gate_id: str) -> dict[str, Any]:
    return next(g for g in raw["gates"] if g["id"] == gate_id)


def test_the_honest_report_verifies_against_its_checkout(
    honest: dict[str, Any], checkout: Path
) -> None:
    assert honest["run"]["provenance"]["check_files"]
    assert honest["run"]["commit_dirty"] is False
    assert problems(honest, checkout) == []


def _invent_passing_check(raw: dict[str, Any]) -> None:
    """no_overlap is MISSING (nothing bound): add a passing check and re-derive."""
    g = gate(raw, "gate.schedule.no_overlap")
    g["checks"] = [
        {
            "nodeid": "src/gates/checks/test_scratch.py::test_overlap",
            "facet": "check",
            "outcome": "passed",
            "duration_s": 0.1,
            "detail": None,
            "evidence": {},
        }
    ]
    g["facets"] = [{"name": "check", "status": "PASS", "checks": [g["checks"][0]["nodeid"]]}]
    g["status"] = "PASS"
    g["detail"] = "every bound check passed"
    raw["summary"]["PASS"] += 1
    raw["summary"]["MISSING"] -= 1


def test_invented_passing_check_for_a_missing_gate_is_refused(honest: dict[str, Any]) -> None:
    found = problems(edited(honest, _invent_passing_check))
    assert any("checks no collection produced" in p for p in found), found


def test_invented_check_also_in_the_inventory_is_refused_by_the_checkout(
    honest: dict[str, Any], checkout: Path
) -> None:
    def both(raw: dict[str, Any]) -> None:
        _invent_passing_check(raw)
        raw["run"]["provenance"]["inventory"].append(
            {
                "nodeid": "src/gates/checks/test_scratch.py::test_overlap",
                "gate": "gate.schedule.no_overlap",
                "facet": "check",
            }
        )

    # Without a checkout the recorded inventory agrees with the checks ...
    assert not any("collect" in p for p in problems(edited(honest, both)))
    found = problems(edited(honest, both), checkout)
    assert any("not bound to gate.schedule.no_overlap" in p for p in found), found


def test_a_deleted_check_is_refused(honest: dict[str, Any]) -> None:
    """The failing check of calendar_values dropped, so the gate looks MISSING."""

    def drop(raw: dict[str, Any]) -> None:
        g = gate(raw, "gate.schedule.calendar_values")
        g["checks"] = []
        g["facets"] = [{"name": "check", "status": "MISSING", "checks": []}]
        g["status"] = "MISSING"
        g["detail"] = "no check is bound"
        raw["summary"]["FAIL"] -= 1
        raw["summary"]["MISSING"] += 1

    found = problems(edited(honest, drop))
    assert any("collected checks missing from the report" in p for p in found), found


def test_a_check_file_deleted_from_the_checkout_is_refused(
    honest: dict[str, Any], checkout: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)
    (copy / "src" / "gates" / "checks" / "test_scratch.py").unlink()
    found = problems(honest, copy)
    assert any("absent from the checkout" in p for p in found), found


def test_an_edited_check_in_the_checkout_is_refused(
    honest: dict[str, Any], checkout: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)
    path = copy / "src" / "gates" / "checks" / "test_scratch.py"
    path.write_text(path.read_text().replace("1 + 1 == 3", "True"))
    found = problems(honest, copy)
    assert any("differs from the file" in p for p in found), found


def test_a_selection_contradicting_the_run_is_refused(honest: dict[str, Any]) -> None:
    """The selection rewritten to one gate, as if the failing gate were never asked for."""

    def narrow(raw: dict[str, Any]) -> None:
        raw["run"]["selection"] = {"gates": ["gate.schedule.civil_time"], "milestones": []}

    found = problems(edited(honest, narrow))
    assert any("selection" in p for p in found), found

    def narrow_both(raw: dict[str, Any]) -> None:
        narrow(raw)
        raw["run"]["command"] = "scheduling-gates run --gate gate.schedule.civil_time"

    found = problems(edited(honest, narrow_both))
    assert any("do not follow from the recorded selection" in p for p in found), found


def test_a_custom_ledger_named_as_the_shipped_one_is_refused(
    checkout: Path, tmp_path: Path
) -> None:
    custom = tmp_path / "ledger.toml"
    custom.write_text(CUSTOM_LEDGER)
    raw = run_in(checkout, tmp_path / "out", ledger=custom)
    assert raw["run"]["ledger"] == str(custom)
    assert problems(raw, ledger=custom) == []  # honest: names its ledger

    def rename(r: dict[str, Any]) -> None:
        r["run"]["ledger"] = SHIPPED.origin
        r["run"]["provenance"]["ledger_shipped"] = True

    # The verifier handed the custom ledger (the ceiling follows from it) ...
    found = problems(edited(raw, rename), ledger=custom)
    assert any("shipped milestone file" in p for p in found), found
    # ... or the shipped one (then the ledger is not the run's).
    found = problems(edited(raw, rename))
    assert found


def test_untracked_check_files_make_the_run_dirty(checkout: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)
    (copy / "src" / "gates" / "checks" / "test_extra.py").write_text(
        "import pytest\n\n@pytest.mark.gate('gate.schedule.no_overlap')\ndef test_x():\n    pass\n"
    )
    raw = run_in(copy, tmp_path / "out")
    assert raw["run"]["provenance"]["untracked"] == ["src/gates/checks/test_extra.py"]
    assert raw["run"]["commit_dirty"] is True
    assert problems(raw, copy, allow_dirty=True) == []
    assert [p for p in problems(raw, copy) if "dirty tree" in p], "a dirty run needs --allow-dirty"

    def clean(r: dict[str, Any]) -> None:
        r["run"]["commit_dirty"] = False

    found = problems(edited(raw, clean))
    assert any("untracked" in p for p in found), found


SNEAKY = textwrap.dedent(
    """
    import subprocess
    from pathlib import Path

    import pytest

    @pytest.mark.gate("gate.schedule.no_overlap")
    def test_stages_itself():
        # Staged while the run is under way: a look at git after the run sees it tracked.
        here = Path(__file__).resolve()
        root = here.parents[3]
        subprocess.run(["git", "add", str(here.relative_to(root))], cwd=root, check=True)
    """
)


def test_a_check_that_stages_itself_during_the_run_still_makes_it_dirty(
    checkout: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)
    (copy / "src" / "gates" / "checks" / "test_sneaky.py").write_text(SNEAKY)
    raw = run_in(copy, tmp_path / "out")
    # The file was collected untracked; that it was tracked when the run ended (staged
    # by the check itself) does not hide it: detection runs before collection.
    outcomes = {c["nodeid"]: c["outcome"] for g in raw["gates"] for c in g["checks"]}
    assert outcomes["src/gates/checks/test_sneaky.py::test_stages_itself"] == "passed"
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--", "src/gates/checks"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout == ""  # a post-run look would have found nothing untracked
    assert raw["run"]["provenance"]["untracked"] == ["src/gates/checks/test_sneaky.py"]
    assert raw["run"]["commit_dirty"] is True
    assert problems(raw, copy, allow_dirty=True) == []


def test_the_report_links_the_latest_sensitivity_run_or_says_there_is_none(
    honest: dict[str, Any], checkout: Path, tmp_path: Path
) -> None:
    assert honest["run"]["sensitivity"]["run"] is None
    assert honest["run"]["sensitivity"]["note"] == "no sensitivity run"
    copy = tmp_path / "copy"
    shutil.copytree(checkout, copy)
    result = copy / "reports" / "out" / "mutants.json"
    result.parent.mkdir(parents=True)
    result.write_text(
        json.dumps(
            {
                "mutants": [{"id": "m", "verdict": "KILLED"}],
                "killed": 1,
                "total": 1,
                "untargeted": [],
                "finished_at": "2026-12-01T03:00:00+00:00",
                "commit": "abc",
            }
        )
    )
    raw = run_in(copy, tmp_path / "out")
    linked = raw["run"]["sensitivity"]
    assert linked["path"] == "reports/out/mutants.json"
    assert linked["sha256"] == hashlib.sha256(result.read_bytes()).hexdigest()
    assert (linked["run"]["killed"], linked["run"]["total"]) == (1, 1)
    markdown = (tmp_path / "out" / "gate-report.md").read_text()
    assert "Sensitivity: latest mutate run reports/out/mutants.json" in markdown


def test_a_report_without_provenance_is_refused(honest: dict[str, Any]) -> None:
    def strip(raw: dict[str, Any]) -> None:
        raw["run"].pop("provenance")

    assert problems(edited(honest, strip)) == [
        "the report records no provenance (catalog, milestone file and check digests)"
    ]


def test_cli_verify_checkout(honest: dict[str, Any], checkout: Path, tmp_path: Path) -> None:
    path = tmp_path / "gate-report.json"
    path.write_text(json.dumps(honest))
    assert main(["verify", str(path), "--checkout", str(checkout)]) == 0
    path.write_text(json.dumps(edited(honest, _invent_passing_check)))
    assert main(["verify", str(path), "--checkout", str(checkout)]) == 1
