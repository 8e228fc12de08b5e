"""``run --shard K/N`` + ``merge`` equal a single run with the same seed; bad parts are
refused with stable codes. One scratch run (every status: PASS, FAIL, ERROR, MISSING,
NOT_RUN) and one small selection of real gate checks, each run whole and as two shards."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gates.runner import RunOptions, run_gates
from gates.runner.cli import main
from gates.runner.inventory import default_checks_dir, project_root
from gates.runner.shard import Shard
from reports.model import GateReport
from simulation.provider import DatabaseServer

SCRATCH = textwrap.dedent(
    """
    import pytest

    @pytest.mark.gate("gate.schedule.civil_time")
    def test_a(gate_evidence):
        gate_evidence.record("examples", 3)

    @pytest.mark.gate("gate.schedule.civil_time")
    def test_b():
        pass

    @pytest.mark.gate("gate.schedule.calendar_values")
    def test_fails():
        assert 1 + 1 == 3

    @pytest.mark.gate("gate.schedule.calendar_values")
    def test_passes_beside_a_failure():
        pass

    @pytest.mark.gate("gate.schedule.domain_invariants")
    def test_cannot_run():
        pytest.skip("needs something absent")

    @pytest.mark.gate("gate.schedule.not_early", facet="calculator")
    def test_one_facet_only():
        pass
    """
)
SCRATCH_GATES = [
    "gate.schedule.civil_time",
    "gate.schedule.calendar_values",
    "gate.schedule.domain_invariants",
    "gate.schedule.not_early",
    "gate.schedule.no_overlap",
]
REAL_GATES = [
    "gate.schedule.model_create_contract",
    "gate.schedule.model_cancel",
    "gate.schedule.cancel_separate",
    "gate.schedule.revision_pinned",
]


def _load(path: Path) -> GateReport:
    return GateReport.model_validate_json(path.read_text(encoding="utf-8"))


def _essence(report: GateReport) -> dict[str, Any]:
    """What must equal between a merged report and a single run."""
    return {
        "statuses": {g.id: g.status for g in report.gates},
        "facets": {g.id: g.facets for g in report.gates},
        "checks": {g.id: [(c.nodeid, c.facet, c.outcome) for c in g.checks] for g in report.gates},
        "rules": {r.id: (r.status, [c.nodeid for c in r.checks]) for r in report.rules},
        "ceiling": report.ceiling,
        "milestones": report.milestones,
        "summary": report.summary,
        "seed": report.run.seed,
        "provenance": report.run.provenance,
        "selection": report.run.selection,
        "requirements": report.requirements,
    }


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("shards")
    checks = root / "checks"
    checks.mkdir()
    (checks / "test_scratch.py").write_text(SCRATCH)
    out = {}
    for name, shard in (("single", None), ("p1", Shard(1, 2)), ("p2", Shard(2, 2))):
        options = RunOptions(
            checks_dir=checks,
            output=root / name,
            gates=SCRATCH_GATES,
            seed=11,
            require_ceiling=9,
            shard=shard,
        )
        run_gates(options)
        out[name] = root / name / "gate-report.json"
    return out


def test_scratch_shards_merge_into_the_single_run(
    scratch: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p1, p2 = _load(scratch["p1"]), _load(scratch["p2"])
    assert p1.run.shard is not None
    assert p2.run.shard is not None
    assert p1.run.shard.checks
    assert p2.run.shard.checks
    assert not set(p1.run.shard.checks) & set(p2.run.shard.checks)
    # Parts are JSON only: no rendering shows a partial verdict.
    assert sorted(p.name for p in scratch["p1"].parent.iterdir()) == ["gate-report.json"]
    code = main(["merge", str(tmp_path / "m"), str(scratch["p2"]), str(scratch["p1"])])
    single = _load(scratch["single"])
    merged = _load(tmp_path / "m" / "gate-report.json")
    assert code == 0  # the bar (ceiling M9) is met, as in the single run
    assert _essence(merged) == _essence(single)
    assert {g.status.value for g in merged.gates} >= {"PASS", "FAIL", "ERROR", "MISSING"}
    assert [s.index for s in merged.run.shards] == [1, 2]
    assert merged.run.shard is None
    assert "merged from 2 shards" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "gate-report.html",
        "gate-report.json",
        "gate-report.md",
        "junit.xml",
    ]


def test_verify_refuses_a_part_and_accepts_the_merge(
    scratch: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(scratch["p1"])]) == 1
    assert "a partial report (shard 1/2)" in capsys.readouterr().err
    assert main(["merge", str(tmp_path), str(scratch["p1"]), str(scratch["p2"])]) == 0
    assert main(["verify", str(tmp_path / "gate-report.json")]) == 0


def _edited(src: Path, dst: Path, edit: Any) -> Path:
    raw = json.loads(src.read_text(encoding="utf-8"))
    edit(raw)
    dst.write_text(json.dumps(raw), encoding="utf-8")
    return dst


def _set(path: str, value: Any) -> Any:
    def edit(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = raw
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


REFUSALS = [
    ("seed", _set("run.seed", 12), "gates.merge.seed_mismatch"),
    ("commit", _set("run.commit", "0" * 40), "gates.merge.commit_mismatch"),
    ("catalog", _set("run.provenance.catalog_sha256", "f" * 64), "gates.merge.catalog_mismatch"),
    ("ledger", _set("run.provenance.ledger_sha256", "e" * 64), "gates.merge.ledger_mismatch"),
    ("files", _set("run.provenance.check_files", {}), "gates.merge.checks_mismatch"),
    ("profile", _set("run.profile", "deep"), "gates.merge.run_mismatch"),
    ("bar", _set("requirements.ceiling", 11), "gates.merge.run_mismatch"),
    ("total", _set("run.shard.total", 3), "gates.merge.shard_total_mismatch"),
    ("index", _set("run.shard.index", 1), "gates.merge.shard_overlap"),
    ("whole", _set("run.shard", None), "gates.merge.not_a_part"),
    ("listed", _set("run.shard.checks", []), "gates.merge.part_inconsistent"),
]


@pytest.mark.parametrize(("name", "edit", "code"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_parts_of_different_runs_are_refused(
    scratch: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    edit: Any,
    code: str,
) -> None:
    second = _edited(scratch["p2"], tmp_path / f"{name}.json", edit)
    assert main(["merge", str(tmp_path / "m"), str(scratch["p1"]), str(second)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"scheduling-gates merge: {code}: "), err
    assert not (tmp_path / "m").exists()


def test_a_missing_or_repeated_shard_is_refused(
    scratch: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["merge", str(tmp_path), str(scratch["p1"])]) == 2
    assert "gates.merge.shard_missing: shard(s) 2/2 missing" in capsys.readouterr().err
    assert main(["merge", str(tmp_path), str(scratch["p1"]), str(scratch["p1"])]) == 2
    assert "gates.merge.shard_overlap: shard 1/2 given twice" in capsys.readouterr().err
    # Both parts claim one check: the second one's shard ran a check of the first.
    p1 = json.loads(scratch["p1"].read_text(encoding="utf-8"))
    stolen = p1["run"]["shard"]["checks"][0]

    def steal(raw: dict[str, Any]) -> None:
        gate = next(g for g in p1["gates"] for c in g["checks"] if c["nodeid"] == stolen)
        check = next(c for c in gate["checks"] if c["nodeid"] == stolen)
        target = next(g for g in raw["gates"] if g["id"] == gate["id"])
        target["checks"].append(check)
        raw["run"]["shard"]["checks"].append(stolen)

    both = _edited(scratch["p2"], tmp_path / "both.json", steal)
    assert main(["merge", str(tmp_path), str(scratch["p1"]), str(both)]) == 2
    assert "gates.merge.shard_overlap: checks in more than one part" in capsys.readouterr().err
    unreadable = tmp_path / "broken.json"
    unreadable.write_text("{", encoding="utf-8")
    assert main(["merge", str(tmp_path), str(scratch["p1"]), str(unreadable)]) == 2
    assert "gates.merge.unreadable" in capsys.readouterr().err


@pytest.mark.postgres
def test_real_checks_shard_merge_and_verify_against_the_checkout(
    pg_server: DatabaseServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    selection = [a for gate in REAL_GATES for a in ("--gate", gate)]
    for name, extra in (("single", []), ("p1", ["--shard", "1/2"]), ("p2", ["--shard", "2/2"])):
        main(["run", *selection, "--seed", "5", "--output", str(tmp_path / name), *extra])
    parts = [str(tmp_path / p / "gate-report.json") for p in ("p1", "p2")]
    assert main(["merge", str(tmp_path / "m"), *parts]) == 0
    single = _load(tmp_path / "single" / "gate-report.json")
    merged = _load(tmp_path / "m" / "gate-report.json")
    assert _essence(merged) == _essence(single)
    assert {g.id for g in merged.gates if g.status.value == "PASS"} == set(REAL_GATES)
    assert merged.run.command == single.run.command.replace(f" --output {tmp_path / 'single'}", "")
    capsys.readouterr()
    root = project_root(default_checks_dir())
    # The run and the checkout are this working tree: dirty while work is under way
    # (CI's clean clone is not), which verify refuses without --allow-dirty (ADR 2150).
    merged_path = str(tmp_path / "m" / "gate-report.json")
    assert main(["verify", "--checkout", str(root), "--allow-dirty", merged_path]) == 0
    assert "is consistent" in capsys.readouterr().out
