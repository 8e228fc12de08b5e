"""``scheduling-gates verify --rerun N``: re-execute a sample of a report's checks.

Consistency cannot tell a real run from a written one; re-execution can. ``verify
--rerun N [--seed S]`` draws N of the report's bound checks (a seeded weighted draw:
checks of gates the report calls PASS and simulator explorations weigh more), runs
them on the checkout in one pytest process with the report's seed and profile (the
checkout's ``src`` first on ``PYTHONPATH``, the gate plugins and the PostgreSQL
provider as ``scheduling-gates run`` loads them) and refuses the report when a check's
outcome differs or the digest of its deterministic evidence (reports/evidence.py) does
not reproduce. A fabricator who wrote k of M checks is caught with probability
``1 - C(M-k, N) / C(M, N)`` for a uniform draw (docs/report-format.md; ADR 2150).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import Any

from gates.runner.inventory import plugin_args
from reports.evidence import differing_keys, evidence_digest
from reports.model import CheckResult, GateReport, GateResult, GateStatus, RuleResult
from scheduling.tzdata_info import tzdata_version

PASS_WEIGHT = 4.0  # a check of a gate the report calls PASS
EXPLORATION_WEIGHT = 3.0  # a simulator exploration (its evidence counts interleavings)
HARNESS_PREFIX = "<collection of "
RERUN_PLUGIN = "gates.runner.rerun_select"
DEFAULT_CHECKS_DIR = "src/gates/checks"
_STDERR_FD = 2  # pytest's progress goes to stderr (under pytest sys.stderr may have no fd)


@dataclass(frozen=True)
class Candidate:
    """A recorded check the sample may draw."""

    nodeid: str
    verdict: str  # the gate or rule id
    claimed: GateStatus  # what the report says of that gate or rule
    check: CheckResult

    @property
    def exploration(self) -> bool:
        return is_exploration(self.check.evidence)

    @property
    def weight(self) -> float:
        weight = PASS_WEIGHT if self.claimed is GateStatus.PASS else 1.0
        return weight * (EXPLORATION_WEIGHT if self.exploration else 1.0)


def is_exploration(evidence: dict[str, Any]) -> bool:
    """Evidence of a simulator exploration (``attach_evidence``, any prefix)."""
    return any(str(k).endswith("interleavings_explored") for k in evidence)


def candidates(report: GateReport) -> list[Candidate]:
    """Every recorded check of a selected gate or rule, in report order (a harness
    ERROR stands for no check and cannot be re-run)."""
    found = []
    verdicts: list[GateResult | RuleResult] = [*report.gates, *report.rules]
    for verdict in verdicts:
        if not verdict.selected:
            continue
        for check in verdict.checks:
            if check.nodeid.startswith(HARNESS_PREFIX):
                continue
            found.append(Candidate(check.nodeid, verdict.id, verdict.status, check))
    return found


def sample(pool: Sequence[Candidate], n: int, seed: int) -> list[Candidate]:
    """``n`` distinct candidates drawn without replacement, each draw in proportion to
    the weights (Efraimidis-Spirakis keys ``u ** (1 / w)`` from ``random.Random(seed)``);
    the whole pool when ``n`` covers it. Returned in pool order."""
    if n >= len(pool):
        return list(pool)
    rng = random.Random(seed)
    keyed = [(rng.random() ** (1.0 / c.weight), i) for i, c in enumerate(pool)]
    chosen = sorted(i for _, i in sorted(keyed, reverse=True)[:n])
    return [pool[i] for i in chosen]


def detection_probability(m: int, k: int, n: int) -> float:
    """The chance a uniform draw of ``n`` of ``m`` checks includes at least one of ``k``
    fabricated ones: ``1 - C(m-k, n) / C(m, n)`` (hypergeometric)."""
    if not 0 <= k <= m or not 0 <= n <= m:
        raise ValueError(f"need 0 <= k, n <= m (m={m}, k={k}, n={n})")
    return 1.0 - comb(m - k, n) / comb(m, n)


def weighted_detection_rate(
    weights: Sequence[float], fabricated: Iterable[int], n: int, trials: int, seed: int = 0
) -> float:
    """The fraction of ``trials`` weighted draws (``sample``'s rule) of ``n`` that hit
    one of the ``fabricated`` positions: a Monte Carlo estimate of the detection chance."""
    bad = set(fabricated)
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        keyed = sorted(
            ((rng.random() ** (1.0 / w), i) for i, w in enumerate(weights)), reverse=True
        )
        hits += any(i in bad for _, i in keyed[:n])
    return hits / trials


@dataclass(frozen=True)
class Rerun:
    """What re-running one sampled check gave, against what the report records."""

    candidate: Candidate
    outcome: str | None  # None: the checkout produced no result for the node id
    recorded_digest: str
    rerun_digest: str | None
    differing: list[str]  # evidence keys whose deterministic values differ
    detail: str | None
    evidence: dict[str, Any] | None = None  # what the re-run recorded

    @property
    def reproduced(self) -> bool:
        return self.outcome == self.candidate.check.outcome.value and (
            self.rerun_digest == self.recorded_digest
        )

    def problem(self) -> str | None:
        c = self.candidate
        if self.outcome is None:
            return f"{c.nodeid}: the checkout ran no such check (no result recorded)"
        if self.outcome != c.check.outcome.value:
            return (
                f"{c.nodeid}: the report says {c.check.outcome.value}, re-running it on the"
                f" checkout gives {self.outcome} ({c.verdict} is {c.claimed.value} in the report)"
            )
        if self.rerun_digest != self.recorded_digest:
            return (
                f"{c.nodeid}: its evidence does not reproduce (digest recorded"
                f" {self.recorded_digest[:12]}, re-run {str(self.rerun_digest)[:12]};"
                f" differing keys: {', '.join(self.differing) or 'none at the top level'})"
            )
        return None


def environment_problems(report: GateReport) -> list[str]:
    """What keeps this environment from reproducing the run exactly."""
    installed = _tzdata()
    if report.run.tzdata != installed:
        return [
            f"cannot re-run: the report's run used tzdata {report.run.tzdata}, this"
            f" environment has {installed}"
        ]
    return []


def _tzdata() -> str | None:
    try:
        return tzdata_version()
    except (ImportError, AttributeError):
        return None


def rerun_checks(
    chosen: Sequence[Candidate],
    checkout: Path,
    seed: int,
    profile: str,
    checks_dir: str = DEFAULT_CHECKS_DIR,
) -> tuple[list[Rerun], int]:
    """Run ``chosen`` on ``checkout`` with ``seed`` and ``profile``; return what each
    gave and pytest's exit code. pytest collects the whole check directory, as the run
    did, and deselects the rest: Hypothesis draws from constants of the modules loaded,
    so collecting only the drawn checks' files generates other examples (measured: the
    civil-time generated cases' tallies differ)."""
    checkout = checkout.resolve()
    env = dict(os.environ)
    env["SCHEDULING_GATE_PROFILE"] = profile
    env["SCHEDULING_GATE_SEED"] = str(seed)
    # The checkout's code, not whatever tree this environment was installed from.
    src = str(checkout / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="gate-rerun-") as tmp:
        wanted = Path(tmp) / "nodeids.json"
        wanted.write_text(json.dumps(sorted({c.nodeid for c in chosen})), encoding="utf-8")
        results_path = Path(tmp) / "results.json"
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--tb=line",  # one line a failure: verify's own lines say what differs
            "-p",
            "no:cacheprovider",
            f"--rootdir={checkout}",
            *plugin_args(),
            "-p",
            RERUN_PLUGIN,
            # "=" forms: pytest takes an existing path argument into its choice of
            # rootdir and configuration file.
            f"--rerun-nodeids={wanted}",
            f"--gate-results={results_path}",
            f"--hypothesis-seed={seed}",
            str(checkout / checks_dir),
        ]
        proc = subprocess.run(args, cwd=checkout, env=env, check=False, stdout=_STDERR_FD)
        results: dict[str, dict[str, Any]] = {}
        if results_path.exists():
            data = json.loads(results_path.read_text(encoding="utf-8"))
            results = {r["nodeid"]: r for r in data["results"]}
    return [_compare(c, results.get(c.nodeid)) for c in chosen], proc.returncode


def _compare(candidate: Candidate, raw: dict[str, Any] | None) -> Rerun:
    recorded = evidence_digest(candidate.check.evidence, candidate.nodeid)
    if raw is None:
        return Rerun(candidate, None, recorded, None, [], None)
    evidence = raw.get("evidence") or {}
    return Rerun(
        candidate,
        str(raw["outcome"]),
        recorded,
        evidence_digest(evidence, candidate.nodeid),
        differing_keys(candidate.check.evidence, evidence, candidate.nodeid),
        raw.get("detail"),
        evidence,
    )


def describe(result: Rerun) -> str:
    c = result.candidate
    tag = "same   " if result.reproduced else "DIFFERS"
    kind = "exploration" if c.exploration else "check"
    got = result.outcome or "no result"
    return (
        f"  {tag} {c.nodeid}  [{kind} of {c.verdict}, {c.claimed.value}; weight {c.weight:g}]"
        f" recorded {c.check.outcome.value}/{result.recorded_digest[:12]},"
        f" re-run {got}/{(result.rerun_digest or '-')[:12]}"
    )
