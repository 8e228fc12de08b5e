"""The example CI workflow parses and does what issue 15 asks, with .ci/run's bar."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "gates.yml"


def _workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _script() -> str:
    steps = _workflow()["jobs"]["gates"]["steps"]
    return "\n".join(str(s.get("run", "")) + str(s.get("uses", "")) for s in steps)


def test_it_parses_and_triggers_on_pushes_and_pull_requests() -> None:
    data = _workflow()
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(triggers) == {"push", "pull_request"}
    assert all("name" in s or "uses" in s for s in data["jobs"]["gates"]["steps"])


def test_it_runs_tests_and_gates_and_publishes_the_report() -> None:
    script = _script()
    for needle in (
        ".venv/bin/pytest",
        "scheduling-gates run --output reports/out $REQUIRE",
        "scheduling-gates verify reports/out/gate-report.json",
        'gate-report.md >> "$GITHUB_STEP_SUMMARY"',
        "actions/upload-artifact",
        "scheduling-gates diff reports/base/gate-report.json",
        "--format markdown",
        "gh pr comment",
    ):
        assert needle in script, needle


def test_its_bar_is_the_one_ci_run_enforces() -> None:
    required = _workflow()["jobs"]["gates"]["env"]["REQUIRE"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(r"scheduling-gates run --output reports/out (.*)$", ci, re.MULTILINE)
    assert match is not None
    assert match.group(1).strip() == required


SHARDED = ROOT / ".github" / "workflows" / "gates-sharded.yml"


def test_the_sharded_example_runs_every_shard_with_one_seed_and_merges_them() -> None:
    data = yaml.safe_load(SHARDED.read_text(encoding="utf-8"))
    jobs = data["jobs"]
    shards = jobs["shard"]["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(data["env"]["SHARDS"]) + 1))
    run = "\n".join(str(s.get("run", "")) for s in jobs["shard"]["steps"])
    assert "--seed ${{ needs.seed.outputs.seed }} $REQUIRE" in run
    assert "--shard ${{ matrix.shard }}/$SHARDS" in run
    merge = "\n".join(str(s.get("run", "")) for s in jobs["merge"]["steps"])
    assert "scheduling-gates merge reports/out parts/gate-part-*/gate-report.json" in merge
    assert "scheduling-gates verify --checkout . reports/out/gate-report.json" in merge
    assert data["env"]["REQUIRE"] == _workflow()["jobs"]["gates"]["env"]["REQUIRE"]
