"""Issue 27: every edit a reviewer who distrusts the submitter can make to a report is
refused by one of re-execution (``verify --rerun``), provenance (product tree,
dependencies, dirty tree, checkout) or the signature (``verify --trust``).

The runs are real and small: one civil-time gate of pure checks (no PostgreSQL,
``gate.schedule.calendar_recurrence``) on scratch checkouts copied from this tree, one
honest and one with a planted civil-time bug (the shipped mutant
``resolve.fold_later_instant``), each a git repository of its own. A scratch checkout
holds that gate's check file only (``KEPT_CHECKS``; every support module stays), so a
run, its inventory and every ``verify --rerun`` collect one file instead of the whole
check directory: the checkout is a smaller project, verified against itself as a
reviewer's checkout would be. The honest and the failing runs are module fixtures
shared by every test (three gate runs in all, the third on a dirty tree).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog import load_catalog
from catalog.milestones import load_milestones
from gates.runner import rerun
from gates.runner.cli import main
from gates.runner.inventory import default_checks_dir, project_root
from gates.runner.mutate import apply, load_mutants
from reports.build import build_gate_results, build_report
from reports.model import CheckOutcome, CheckResult, GateReport, GateStatus
from reports.origin import product_tree_digest
from testsupport.git import git

GATES = ["gate.schedule.calendar_recurrence"]
KEPT_CHECKS = {"test_calendar.py"}  # the check file of GATES
BUG = "resolve.fold_later_instant"  # a civil-time bug: the later instant of a fold
SEED = 5
ROOT = project_root(default_checks_dir())
COPIED = ("src", "pyproject.toml", "alembic.ini")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


def _checkout(destination: Path) -> Path:
    """A git repository holding a copy of this tree."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, destination / name, ignore=IGNORED)
        else:
            shutil.copy(source, destination / name)
    for check in (destination / "src" / "gates" / "checks").glob("test_*.py"):
        if check.name not in KEPT_CHECKS:
            check.unlink()
    (destination / ".gitignore").write_text(".hypothesis/\n.simulation/\n")
    git(destination, "init", "-q")
    git(destination, "add", "-A")
    git(destination, "commit", "-qm", "base")
    return destination


def _plant(root: Path) -> None:
    mutant = next(m for m in load_mutants() if m.id == BUG)
    assert apply(mutant, root) is None, f"the mutant {BUG} no longer applies"


def _run(checkout: Path, out: Path, *extra: str, seed: int = SEED) -> dict[str, Any]:
    """``scheduling-gates run`` on ``checkout`` with its own code (its src first)."""
    env = dict(os.environ, PYTHONPATH=str(checkout / "src"))
    selection = [a for g in GATES for a in ("--gate", g)]
    argv = ["run", *selection, "--seed", str(seed), "--output", str(out), *extra]
    subprocess.run(
        [sys.executable, "-m", "gates.runner.cli", *argv],
        cwd=checkout,
        env=env,
        check=False,
        capture_output=True,
    )
    raw: dict[str, Any] = json.loads((out / "gate-report.json").read_text(encoding="utf-8"))
    return raw


@contextlib.contextmanager
def _built_once(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A directory every xdist worker of this session shares (the session's base temp),
    built by the first worker to get the lock; the others wait and reuse it, so the
    gate runs are not repeated on each worker the module's tests land on."""
    session = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:  # a worker's base temp is the session's child
        session = session.parent
    root = session / f"fabrication-{name}"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"fabrication-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield root
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base and buggy checkouts, the signing keys, the honest (signed) and failing
    reports: built once per session, whatever the number of workers."""
    with _built_once(tmp_path_factory, "runs") as root:
        if not (root / "done").exists():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            base = _checkout(root / "base")
            buggy = root / "buggy"
            shutil.copytree(base, buggy)
            _plant(buggy)  # the next commit: the base with the planted bug committed
            git(buggy, "commit", "-qam", "with the bug")
            assert main(["keygen", str(root / "ci.key"), str(root / "ci.pub")]) == 0
            honest = _run(base, root / "honest", "--sign", str(root / "ci.key"))
            assert {g["status"] for g in honest["gates"] if g["selected"]} == {"PASS"}
            assert (root / "honest" / "gate-report.dsse.json").is_file()
            failing = _run(buggy, root / "failing")
            statuses = {g["id"]: g["status"] for g in failing["gates"] if g["selected"]}
            assert statuses == dict.fromkeys(GATES, "FAIL")
            assert failing["run"]["commit_dirty"] is False
            (root / "done").write_text("")
    return root


@pytest.fixture(scope="module")
def base(built: Path) -> Path:
    return built / "base"


@pytest.fixture(scope="module")
def buggy(built: Path) -> Path:
    """The next commit: the base with the planted bug committed."""
    return built / "buggy"


@pytest.fixture(scope="module")
def keys(built: Path) -> tuple[Path, Path]:
    return built / "ci.key", built / "ci.pub"


@pytest.fixture(scope="module")
def honest(built: Path) -> Path:
    """A signed report of the honest tree: every selected gate PASS."""
    return built / "honest" / "gate-report.json"


@pytest.fixture(scope="module")
def failing(built: Path) -> Path:
    """The planted bug's report: the civil-time gate FAILs, on a clean commit."""
    return built / "failing" / "gate-report.json"


def _load(path: Path) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return raw


def _write(raw: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    return path


def rederive(raw: dict[str, Any], edit: Callable[[dict[str, list[CheckResult]]], None]) -> Any:
    """What a careful fabricator does: edit checks, then recompute every derived field
    (facets, statuses, milestones, ceiling, summary, bar) with the project's own builder,
    so the report stays consistent."""
    report = GateReport.model_validate(raw)
    catalog = load_catalog()
    ledger = load_milestones(None, catalog.milestones())
    checks = {g.id: list(g.checks) for g in report.gates if g.selected}
    edit(checks)
    selected = {g.id for g in report.gates if g.selected}
    gates = build_gate_results(catalog, selected, checks, report.run.seed, report.run.profile)
    fabricated = build_report(
        catalog, ledger, gates, report.run, report.requirements, list(report.rules)
    )
    return fabricated.model_dump(mode="json")


def four_edits(raw: dict[str, Any]) -> dict[str, Any]:
    """Issue 27's fabrication: the failing checks' outcomes, hence the two gates'
    statuses and facets and the milestone counts, and ``commit_dirty``."""

    def flip(checks: dict[str, list[CheckResult]]) -> None:
        for gate_id, results in checks.items():
            checks[gate_id] = [
                c.model_copy(update={"outcome": CheckOutcome.PASSED, "detail": None})
                for c in results
            ]

    fabricated: dict[str, Any] = rederive(raw, flip)
    fabricated["run"]["commit_dirty"] = False
    return fabricated


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _flipped(failing_raw: dict[str, Any]) -> list[str]:
    return [
        c["nodeid"] for g in failing_raw["gates"] for c in g["checks"] if c["outcome"] == "failed"
    ]


def _sampling_seed(report: dict[str, Any], wanted: set[str], n: int) -> int:
    """A sampling seed whose draw of ``n`` includes one of ``wanted`` (searched, so the
    test does not depend on one seed's luck; the odds are the doc's table)."""
    pool = rerun.candidates(GateReport.model_validate(report))
    return next(s for s in range(1000) if wanted & {c.nodeid for c in rerun.sample(pool, n, s)})


# ------------------------------------------------------------------ the four edits


def test_the_four_edit_fabrication_is_consistent_so_plain_verify_accepts_it(
    failing: Path, buggy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fabricated = _write(four_edits(_load(failing)), tmp_path / "gate-report.json")
    assert {g["status"] for g in _load(fabricated)["gates"] if g["selected"]} == {"PASS"}
    code, text = _verify(capsys, "--checkout", str(buggy), str(fabricated))
    assert code == 0, text  # the finding: consistency cannot tell
    assert "is consistent" in text


def test_the_four_edit_fabrication_is_refused_by_rerun(
    failing: Path, buggy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = four_edits(_load(failing))
    fabricated = _write(raw, tmp_path / "gate-report.json")
    flipped = set(_flipped(_load(failing)))
    assert flipped
    seed = _sampling_seed(raw, flipped, 3)
    argv = ["--checkout", str(buggy), "--rerun", "3", "--seed", str(seed), str(fabricated)]
    code, text = _verify(capsys, *argv)
    assert code == 1
    assert "REFUSED" in text
    assert "the report says passed, re-running it on the checkout gives failed" in text


def test_the_four_edit_fabrication_is_refused_by_trust_when_unsigned(
    failing: Path,
    buggy: Path,
    keys: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fabricated = _write(four_edits(_load(failing)), tmp_path / "gate-report.json")
    code, text = _verify(capsys, "--checkout", str(buggy), "--trust", str(keys[1]), str(fabricated))
    assert code == 1
    assert "unsigned: no signature envelope" in text


def test_the_four_edits_on_a_dirty_run_are_refused_by_provenance(
    base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's exact case: the bug uncommitted in the run's tree. The reviewer's
    checkout of the commit has another product tree; the dirty run itself needs
    --allow-dirty."""
    dirty = tmp_path / "dirty"
    shutil.copytree(base, dirty)
    _plant(dirty)
    raw = _run(dirty, tmp_path / "out")
    assert raw["run"]["commit_dirty"] is True
    assert {g["status"] for g in raw["gates"] if g["selected"]} == {"FAIL"}
    code, text = _verify(
        capsys, "--checkout", str(dirty), str(tmp_path / "out" / "gate-report.json")
    )
    assert code == 1
    assert "dirty tree" in text
    fabricated = _write(four_edits(raw), tmp_path / "gate-report.json")
    code, text = _verify(capsys, "--checkout", str(base), str(fabricated))
    assert code == 1
    assert "is not the one the report's run used" in text  # the product tree


# ------------------------------------------------------------------ the other edits


def test_the_honest_signed_report_verifies_with_rerun_and_trust(
    honest: Path, base: Path, keys: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--checkout", str(base), "--trust", str(keys[1]), "--rerun", "3", "--seed", "1"]
    code, text = _verify(capsys, *argv, str(honest))
    assert code == 0, text
    assert "3 of 3 re-run checks reproduced" in text
    assert "signed by the trusted key" in text


def test_an_edited_signed_report_is_refused_by_trust(
    honest: Path, keys: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _load(honest)
    raw["run"]["duration_s"] = raw["run"]["duration_s"] + 1  # any edit, even a harmless one
    edited = _write(raw, tmp_path / "gate-report.json")
    shutil.copy(honest.with_name("gate-report.dsse.json"), tmp_path / "gate-report.dsse.json")
    code, text = _verify(capsys, "--trust", str(keys[1]), str(edited))
    assert code == 1
    assert "the report was changed after signing" in text
    # Re-indenting is no edit: the signature covers the canonical bytes.
    _write(_load(honest), tmp_path / "gate-report.json")
    assert _verify(capsys, "--trust", str(keys[1]), str(tmp_path / "gate-report.json"))[0] == 0


def test_a_report_signed_by_another_key_is_refused(
    honest: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", str(tmp_path / "other.key"), str(tmp_path / "other.pub")]) == 0
    code, text = _verify(capsys, "--trust", str(tmp_path / "other.pub"), str(honest))
    assert code == 1
    assert "no signature verifies against the trusted key" in text


def test_an_old_commits_report_replayed_on_a_new_commit_is_refused(
    honest: Path, failing: Path, buggy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base commit's passing report offered for the commit with the bug: refused by
    provenance; rewritten to name the new commit and tree, refused by re-execution."""
    code, text = _verify(capsys, "--checkout", str(buggy), str(honest))
    assert code == 1
    assert "the checkout is at" in text
    assert "product tree" in text
    raw = _load(honest)
    raw["run"]["commit"] = git(buggy, "rev-parse", "HEAD")
    raw["run"]["provenance"]["product_sha256"] = product_tree_digest(buggy)
    replayed = _write(raw, tmp_path / "gate-report.json")
    code, text = _verify(capsys, "--checkout", str(buggy), str(replayed))
    assert code == 0, text  # consistent
    failed_there = set(_flipped(_load(failing)))
    wrong = [
        c for c in rerun.candidates(GateReport.model_validate(raw)) if c.nodeid in failed_there
    ]
    results, _ = rerun.rerun_checks(wrong[:2], buggy, raw["run"]["seed"], raw["run"]["profile"])
    assert len(results) == 2
    assert all("gives failed" in str(r.problem()) for r in results)


def test_a_dropped_failing_check_is_refused_by_provenance(
    failing: Path, buggy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _load(failing)
    dropped = set(_flipped(raw))

    def drop(checks: dict[str, list[CheckResult]]) -> None:
        for gate_id, results in checks.items():
            checks[gate_id] = [c for c in results if c.nodeid not in dropped]

    fabricated = rederive(raw, drop)
    assert all(g["status"] == "PASS" for g in fabricated["gates"] if g["selected"])
    code, text = _verify(capsys, str(_write(fabricated, tmp_path / "a.json")))
    assert code == 1
    assert "collected checks missing from the report" in text
    # Dropped from the inventory too: the checkout's markers still bind them.
    inventory = fabricated["run"]["provenance"]["inventory"]
    fabricated["run"]["provenance"]["inventory"] = [
        e for e in inventory if e["nodeid"] not in dropped
    ]
    code, text = _verify(
        capsys, "--checkout", str(buggy), str(_write(fabricated, tmp_path / "b.json"))
    )
    assert code == 1
    assert "in the checkout, not collected" in text


@pytest.fixture(scope="module")
def other_seed(honest: Path, base: Path) -> tuple[rerun.Candidate, rerun.Rerun]:
    """A seeded check of the honest report, re-run for real under another seed
    (``SEED + 1``): shared by the two tests below (one re-run process, not two)."""
    report = GateReport.model_validate(_load(honest))
    seeded = [c for c in rerun.candidates(report) if "reproduction" in c.check.evidence]
    assert seeded, "a calendar check records its seed"
    results, _ = rerun.rerun_checks(seeded[:1], base, SEED + 1, report.run.profile)
    return seeded[0], results[0]


def test_a_changed_seed_is_refused_by_rerun(
    honest: Path, other_seed: tuple[rerun.Candidate, rerun.Rerun]
) -> None:
    """The seed rewritten everywhere (run, reproduce commands): the checks that record
    their seed reproduce under the new one with other evidence."""
    raw = _load(honest)
    raw["run"]["seed"] = SEED + 1
    for g in raw["gates"]:
        g["reproduce"] = g["reproduce"].replace(f"--seed {SEED}", f"--seed {SEED + 1}")
    report = GateReport.model_validate(raw)
    candidate, result = other_seed
    assert report.run.seed == SEED + 1
    assert candidate.nodeid in {c.nodeid for c in rerun.candidates(report)}
    assert result.outcome == "passed"
    assert "its evidence does not reproduce" in str(result.problem())
    assert "reproduction" in result.differing


def test_another_runs_evidence_swapped_in_is_refused_by_rerun(
    honest: Path, base: Path, other_seed: tuple[rerun.Candidate, rerun.Rerun]
) -> None:
    """A check's evidence from a run under another seed (a real one: re-run here),
    pasted into this report: it does not reproduce under this report's seed."""
    report = GateReport.model_validate(_load(honest))
    candidate, other = other_seed
    assert other.outcome == "passed"
    assert other.evidence is not None
    swapped_check = candidate.check.model_copy(update={"evidence": other.evidence})
    swapped = rerun.Candidate(candidate.nodeid, candidate.verdict, GateStatus.PASS, swapped_check)
    results, _ = rerun.rerun_checks([swapped], base, report.run.seed, report.run.profile)
    assert results[0].outcome == "passed"
    assert "its evidence does not reproduce" in str(results[0].problem())
