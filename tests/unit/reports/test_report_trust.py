"""Issue 27's mechanisms without a run: signatures, the deterministic evidence digest,
the product-tree and dependency digests, the rerun sample and its detection odds (the
table in docs/report-format.md is checked against the formula)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import stat
import subprocess
from itertools import combinations
from math import comb
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog import load_catalog
from catalog.milestones import load_milestones
from gates.runner import rerun
from gates.runner.cli import main
from reports.build import build_gate_results, build_report
from reports.evidence import deterministic, differing_keys, evidence_digest
from reports.model import (
    CheckOutcome,
    CheckResult,
    GateReport,
    GateStatus,
)
from reports.origin import (
    dependency_changes,
    dependency_digest,
    dependency_set,
    product_tree_digest,
)
from reports.signing import (
    SigningError,
    envelope_path,
    generate_key_pair,
    load_private_key,
    load_public_key,
    sign,
    signature_problems,
)
from testsupport.reports import run_metadata

DOC = Path(__file__).resolve().parents[3] / "docs" / "report-format.md"
REPORT: dict[str, Any] = {"schema_version": "1.0", "gates": [{"id": "g", "status": "PASS"}]}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    generate_key_pair(tmp_path / "k.pem", tmp_path / "k.pub")
    return tmp_path / "k.pem", tmp_path / "k.pub"


def _envelope(tmp_path: Path, raw: Any, key: Path) -> Path:
    path = tmp_path / "gate-report.dsse.json"
    path.write_text(json.dumps(sign(raw, load_private_key(key))))
    return path


# ------------------------------------------------------------------ signatures


def test_a_signed_report_verifies_and_any_edit_breaks_it(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    envelope = _envelope(tmp_path, REPORT, pair[0])
    trusted = load_public_key(pair[1])
    assert signature_problems(REPORT, envelope, trusted) == []
    reordered = json.loads(json.dumps(REPORT, sort_keys=True, indent=4))
    assert signature_problems(reordered, envelope, trusted) == []
    edited = json.loads(json.dumps(REPORT))
    edited["gates"][0]["status"] = "FAIL"
    assert signature_problems(edited, envelope, trusted) == [
        "the envelope signs another report: the report was changed after signing"
    ]


def test_a_payload_swapped_inside_the_envelope_fails_the_signature(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    envelope = _envelope(tmp_path, REPORT, pair[0])
    data = json.loads(envelope.read_text())
    forged = {"schema_version": "1.0", "gates": []}
    data["payload"] = base64.b64encode(
        json.dumps(forged, sort_keys=True, separators=(",", ":")).encode()
    ).decode()
    envelope.write_text(json.dumps(data))
    problems = signature_problems(forged, envelope, load_public_key(pair[1]))
    assert len(problems) == 1
    assert problems[0].startswith("no signature verifies against the trusted key")


def test_unsigned_malformed_and_foreign_envelopes_are_refused(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    trusted = load_public_key(pair[1])
    missing = signature_problems(REPORT, tmp_path / "none.json", trusted)
    assert missing[0].startswith("unsigned: no signature envelope")
    broken = tmp_path / "broken.json"
    broken.write_text('{"payload": "***"}')
    assert "is malformed" in signature_problems(REPORT, broken, trusted)[0]
    envelope = _envelope(tmp_path, REPORT, pair[0])
    data = json.loads(envelope.read_text())
    data["payloadType"] = "application/vnd.in-toto+json"
    envelope.write_text(json.dumps(data))
    assert "not a gate report" in signature_problems(REPORT, envelope, trusted)[0]


def test_keygen_writes_an_owner_only_private_key_and_never_overwrites(tmp_path: Path) -> None:
    assert main(["keygen", str(tmp_path / "a.key"), str(tmp_path / "a.pub")]) == 0
    assert stat.S_IMODE((tmp_path / "a.key").stat().st_mode) == 0o600
    assert "PUBLIC KEY" in (tmp_path / "a.pub").read_text()
    with pytest.raises(SigningError, match="not overwriting"):
        generate_key_pair(tmp_path / "a.key", tmp_path / "b.pub")
    assert main(["keygen", str(tmp_path / "a.key"), str(tmp_path / "c.pub")]) == 2


def test_a_key_of_another_kind_or_no_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "junk.pem").write_text("not a key")
    with pytest.raises(SigningError, match="cannot read the signing key"):
        load_private_key(tmp_path / "junk.pem")
    with pytest.raises(SigningError, match="cannot read the trusted key"):
        load_public_key(tmp_path / "absent.pub")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl binary")
def test_openssl_keys_work(tmp_path: Path) -> None:
    key, pub = tmp_path / "o.key", tmp_path / "o.pub"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)],
        check=True,
        capture_output=True,
    )
    envelope = _envelope(tmp_path, REPORT, key)
    assert signature_problems(REPORT, envelope, load_public_key(pub)) == []


def test_the_envelope_sits_beside_the_report() -> None:
    assert envelope_path(Path("out/gate-report.json")) == Path("out/gate-report.dsse.json")


# ------------------------------------------------------------------ evidence


def test_volatile_evidence_is_left_out_at_any_depth() -> None:
    evidence = {
        "interleavings_explored": 40,
        "upgrade_seconds": 1.7,
        "lock_backend_xid": [15006, "777"],
        "server": {"version": "17.2"},
        "saved_traces": ["/tmp/x"],
        "failures": [{"seed": 3, "replay": "scheduling-sim replay /tmp/x", "violations": []}],
    }
    assert deterministic(evidence) == {
        "interleavings_explored": 40,
        "failures": [{"seed": 3, "violations": []}],
    }
    moved = {
        **evidence,
        "upgrade_seconds": 9.9,
        "saved_traces": ["/var/y"],
        "lock_backend_xid": [1],
    }
    assert evidence_digest(moved) == evidence_digest(evidence)
    fewer = {**evidence, "interleavings_explored": 39}
    assert evidence_digest(fewer) != evidence_digest(evidence)
    assert differing_keys(evidence, fewer) == ["interleavings_explored"]


def test_a_files_raced_keys_are_left_out_of_its_checks_only() -> None:
    raced = {"examples": 30, "outcomes": {"ok": 7}}
    other = {"examples": 30, "outcomes": {"ok": 8}}
    lifecycle = "src/gates/checks/test_lifecycle.py::test_lifecycle_histories_are_linearizable"
    assert evidence_digest(raced, lifecycle) == evidence_digest(other, lifecycle)
    assert differing_keys(raced, other, "src/gates/checks/test_not_early.py::t") == ["outcomes"]


# ------------------------------------------------------------------ what ran


def test_the_product_tree_digest_covers_paths_and_bytes_not_caches(tmp_path: Path) -> None:
    tree = tmp_path / "src" / "scheduling"
    tree.mkdir(parents=True)
    (tree / "a.py").write_text("x = 1\n")
    first = product_tree_digest(tmp_path)
    (tree / "__pycache__").mkdir()
    (tree / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (tree / "b.pyc").write_bytes(b"\0")
    assert product_tree_digest(tmp_path) == first
    (tree / "a.py").write_text("x = 2\n")
    assert product_tree_digest(tmp_path) != first
    (tree / "a.py").write_text("x = 1\n")
    (tree / "a.py").rename(tree / "c.py")
    assert product_tree_digest(tmp_path) != first
    assert product_tree_digest(tmp_path / "none") == product_tree_digest(tmp_path / "other")


def test_the_dependency_set_is_this_environments() -> None:
    found = dependency_set()
    assert found == sorted(found)
    assert any(line.startswith("pydantic==") for line in found)
    assert not any(line.startswith("pip==") for line in found)
    assert dependency_digest(found) == dependency_digest(list(found))
    changed = [line if not line.startswith("pydantic==") else "pydantic==0.0" for line in found]
    assert dependency_digest(changed) != dependency_digest(found)
    assert dependency_changes(["a==1", "b==2"], ["b==3", "c==1"]) == [
        "a: 1 -> absent",
        "b: 2 -> 3",
        "c: absent -> 1",
    ]


# ------------------------------------------------------------------ the sample


def _report(checks: int, fabricated: int) -> tuple[GateReport, set[str]]:
    """A report whose civil-time gate holds ``checks`` passing checks, the first
    ``fabricated`` of which a fabricator wrote (flipped from failed)."""
    catalog = load_catalog()
    ledger = load_milestones(None, catalog.milestones())
    results = [
        CheckResult(nodeid=f"f.py::t[{i}]", facet="check", outcome=CheckOutcome.PASSED)
        for i in range(checks)
    ]
    gates = build_gate_results(
        catalog, {"gate.schedule.civil_time"}, {"gate.schedule.civil_time": results}, 1, "quick"
    )
    run = run_metadata(seed=1).model_copy(
        update={
            "commit": None,
            "selection": {"gates": ["gate.schedule.civil_time"], "milestones": []},
        }
    )
    return build_report(catalog, ledger, gates, run), {f"f.py::t[{i}]" for i in range(fabricated)}


def test_the_sample_is_seeded_distinct_and_of_the_asked_size() -> None:
    report, _ = _report(30, 0)
    pool = rerun.candidates(report)
    assert len(pool) == 30
    first = rerun.sample(pool, 7, seed=11)
    assert [c.nodeid for c in first] == [c.nodeid for c in rerun.sample(pool, 7, seed=11)]
    assert len({c.nodeid for c in first}) == 7
    assert [c.nodeid for c in rerun.sample(pool, 7, seed=12)] != [c.nodeid for c in first]
    assert rerun.sample(pool, 99, seed=1) == pool


def test_the_formula_is_the_hypergeometric_count() -> None:
    """1 - C(M-k, N)/C(M, N) equals the share of N-subsets holding a fabricated check."""
    m, k, n = 9, 2, 3
    subsets = list(combinations(range(m), n))
    hit = sum(1 for s in subsets if any(i < k for i in s))
    assert rerun.detection_probability(m, k, n) == pytest.approx(hit / comb(m, n))
    assert rerun.detection_probability(10, 0, 5) == 0
    assert rerun.detection_probability(10, 1, 10) == 1


def test_on_a_fabricated_report_the_sample_catches_it_as_often_as_the_formula_says() -> None:
    m, k, n, trials = 40, 3, 6, 3000
    report, fabricated = _report(m, k)
    pool = rerun.candidates(report)
    caught = sum(
        bool(fabricated & {c.nodeid for c in rerun.sample(pool, n, seed)}) for seed in range(trials)
    )
    expected = rerun.detection_probability(m, k, n)
    assert caught / trials == pytest.approx(expected, abs=0.035)


def test_weights_favour_claimed_passes_and_explorations() -> None:
    check = CheckResult(nodeid="x", facet="check", outcome=CheckOutcome.PASSED)
    explored = check.model_copy(update={"evidence": {"race_interleavings_explored": 4}})
    plain_fail = rerun.Candidate("x", "g", GateStatus.FAIL, check)
    plain_pass = rerun.Candidate("x", "g", GateStatus.PASS, check)
    exploration = rerun.Candidate("x", "g", GateStatus.PASS, explored)
    assert plain_fail.weight == 1
    assert plain_pass.weight == rerun.PASS_WEIGHT
    assert exploration.weight == rerun.PASS_WEIGHT * rerun.EXPLORATION_WEIGHT
    assert exploration.exploration
    assert not plain_pass.exploration


def _doc_rows(heading: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    rows: list[list[str]] = []
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def test_the_documented_detection_table_is_the_formula() -> None:
    rows = _doc_rows("Detection probability (uniform draw)")
    header, body = rows[0], rows[1:]
    sizes = [int(re.sub(r"\D", "", h)) for h in header[2:]]
    assert body
    for row in body:
        m, k = int(row[0]), int(row[1])
        for n, cell in zip(sizes, row[2:], strict=True):
            assert float(cell) == pytest.approx(rerun.detection_probability(m, k, n), abs=0.005)


def test_the_documented_weighted_figures_are_what_the_sampler_does() -> None:
    """M = 128, 10 explorations, every gate claimed PASS (docs/report-format.md)."""
    weights = [rerun.PASS_WEIGHT * rerun.EXPLORATION_WEIGHT] * 10 + [rerun.PASS_WEIGHT] * 118
    rows = _doc_rows("Detection probability (weighted draw)")
    for row in rows[1:]:
        k, n = int(row[0]), int(row[1])
        plain = rerun.weighted_detection_rate(weights, range(10, 10 + k), n, 4000, seed=3)
        explored = rerun.weighted_detection_rate(weights, range(k), n, 4000, seed=3)
        assert float(row[2]) == pytest.approx(rerun.detection_probability(128, k, n), abs=0.005)
        assert float(row[3]) == pytest.approx(plain, abs=0.035)
        assert float(row[4]) == pytest.approx(explored, abs=0.035)


# ------------------------------------------------------------------ the example workflow


def test_the_example_workflow_signs_verifies_and_attests() -> None:
    workflow = DOC.parents[1] / ".github" / "workflows" / "gates.yml"
    data = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    steps = data["jobs"]["gates"]["steps"]
    script = "\n".join(str(s.get("run", "")) for s in steps)
    assert "secrets.GATE_REPORT_SIGNING_KEY" in workflow.read_text(encoding="utf-8")
    assert "${{ steps.key.outputs.sign }}" in script
    assert "--checkout ." in script
    assert "${{ steps.key.outputs.trust }}" in script
    attest = [s for s in steps if str(s.get("uses", "")).startswith("actions/attest-build")]
    assert len(attest) == 1
    assert attest[0]["with"]["subject-path"] == "reports/out/gate-report.json"
    assert {"id-token", "attestations"} <= set(data["permissions"])
