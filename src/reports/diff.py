"""What changed between two gate reports, and whether any of it is a regression.

A regression is: the ceiling moved down, a gate's status got worse (PASS best, then
MISSING/NOT_RUN, ERROR, FAIL worst), a bound check disappeared, or a check's
evidence shrank (a smaller count of examples, interleavings, executions, crash
points, zones, cases or scans). Seeds are not counts and are never compared. Runs
under different seeds explore different random examples, so between them a shrink
within ``SEED_TOLERANCE`` is listed but is not a regression; under one seed any
shrink is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reports.model import GateReport, GateStatus

_RANK = {
    GateStatus.PASS: 0,
    GateStatus.MISSING: 1,
    GateStatus.NOT_RUN: 1,
    GateStatus.ERROR: 2,
    GateStatus.FAIL: 3,
}
# Evidence keys whose numbers measure how much a check explored.
_MEASURES = ("example", "interleaving", "execution", "crash", "zone", "case", "scan")
SEED_TOLERANCE = 0.10


@dataclass(frozen=True)
class StatusChange:
    gate: str
    old: str
    new: str
    regression: bool


@dataclass(frozen=True)
class CheckChange:
    gate: str
    nodeid: str
    change: str  # "added" or "removed"
    regression: bool


@dataclass(frozen=True)
class EvidenceShrink:
    gate: str
    nodeid: str
    key: str
    old: int
    new: int
    regression: bool


@dataclass(frozen=True)
class ReportDiff:
    old_ceiling: str
    new_ceiling: str
    ceiling_moved: int  # new - old, in milestones
    statuses: list[StatusChange] = field(default_factory=list)
    checks: list[CheckChange] = field(default_factory=list)
    evidence: list[EvidenceShrink] = field(default_factory=list)

    @property
    def regressions(self) -> int:
        flags = [c.regression for c in self.statuses]
        flags += [c.regression for c in self.checks]
        flags += [e.regression for e in self.evidence]
        return flags.count(True) + (1 if self.ceiling_moved < 0 else 0)

    @property
    def unchanged(self) -> bool:
        return not (self.ceiling_moved or self.statuses or self.checks or self.evidence)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["regressions"] = self.regressions
        return data


def measures(evidence: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, int]]:
    """Every count in a check's evidence that measures exploration, by dotted key."""
    for key, value in evidence.items():
        name = f"{prefix}{key}"
        if "seed" in key.lower():
            continue
        if isinstance(value, Mapping):
            yield from measures(value, f"{name}.")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and any(m in key.lower() for m in _MEASURES):
            yield name, value
        elif isinstance(value, list) and any(m in key.lower() for m in _MEASURES):
            yield name, len(value)


def diff_reports(old: GateReport, new: GateReport) -> ReportDiff:
    same_seed = old.run.seed == new.run.seed

    def shrunk(gate: str, nodeid: str, key: str, was: int, now: int) -> EvidenceShrink:
        noise = not same_seed and now >= was * (1 - SEED_TOLERANCE)
        return EvidenceShrink(gate, nodeid, key, was, now, regression=not noise)

    old_gates = {g.id: g for g in old.gates}
    statuses: list[StatusChange] = []
    checks: list[CheckChange] = []
    evidence: list[EvidenceShrink] = []
    for gate in new.gates:
        before = old_gates.get(gate.id)
        if before is None:
            continue
        if before.status != gate.status:
            worse = _RANK[gate.status] > _RANK[before.status]
            statuses.append(StatusChange(gate.id, before.status, gate.status, worse))
        old_checks = {c.nodeid: c for c in before.checks}
        new_checks = {c.nodeid: c for c in gate.checks}
        for nodeid in sorted(new_checks.keys() - old_checks.keys()):
            checks.append(CheckChange(gate.id, nodeid, "added", regression=False))
        for nodeid in sorted(old_checks.keys() - new_checks.keys()):
            # A check that left a gate NOT_RUN was only filtered out, not removed.
            gone = gate.status != GateStatus.NOT_RUN
            checks.append(CheckChange(gate.id, nodeid, "removed", regression=gone))
        for nodeid in sorted(old_checks.keys() & new_checks.keys()):
            was = dict(measures(old_checks[nodeid].evidence))
            now = dict(measures(new_checks[nodeid].evidence))
            for key in sorted(was):
                if now.get(key, 0) < was[key]:
                    evidence.append(shrunk(gate.id, nodeid, key, was[key], now.get(key, 0)))
    return ReportDiff(
        old_ceiling=old.ceiling.label,
        new_ceiling=new.ceiling.label,
        ceiling_moved=new.ceiling.milestone - old.ceiling.milestone,
        statuses=statuses,
        checks=checks,
        evidence=evidence,
    )


def _ceiling_line(diff: ReportDiff) -> str:
    if diff.ceiling_moved < 0:
        return f"Ceiling went DOWN: {diff.old_ceiling} → {diff.new_ceiling}"
    if diff.ceiling_moved > 0:
        return f"Ceiling went up: {diff.old_ceiling} → {diff.new_ceiling}"
    return f"Ceiling unchanged: {diff.new_ceiling}"


def render_diff_markdown(diff: ReportDiff) -> str:
    verdict = (
        f"❌ **{diff.regressions} regression(s)**"
        if diff.regressions
        else ("✅ No change" if diff.unchanged else "✅ No regressions")
    )
    lines = ["## Gate report diff", "", f"{verdict} · {_ceiling_line(diff)}", ""]
    if diff.statuses:
        lines += [
            "### Gates that changed status",
            "",
            "| Gate | Was | Now | |",
            "| --- | --- | --- | --- |",
        ]
        lines += [
            f"| `{s.gate}` | {s.old} | {s.new} | {'regression' if s.regression else 'better'} |"
            for s in diff.statuses
        ]
        lines.append("")
    if diff.checks:
        lines += ["### Checks added or removed", ""]
        lines += [
            f"- {c.change}{' (regression)' if c.regression else ''}: `{c.nodeid}` (`{c.gate}`)"
            for c in diff.checks
        ]
        lines.append("")
    if diff.evidence:
        lines += ["### Evidence that shrank", "", "| Check | Measure | Was | Now |"]
        lines.append("| --- | --- | --- | --- |")
        lines += [
            f"| `{e.nodeid}` | {e.key} | {e.old} | {e.new}"
            f"{'' if e.regression else ' (within seed variation)'} |"
            for e in diff.evidence
        ]
        lines.append("")
    return "\n".join(lines)


def render_diff_text(diff: ReportDiff) -> str:
    lines = [_ceiling_line(diff)]
    lines += [
        f"{'REGRESSION' if s.regression else 'better    '} {s.gate}: {s.old} -> {s.new}"
        for s in diff.statuses
    ]
    lines += [
        f"{'REGRESSION' if c.regression else 'added     '} check {c.change}: {c.nodeid}"
        for c in diff.checks
    ]
    lines += [
        f"{'REGRESSION' if e.regression else 'varied    '} evidence shrank: {e.nodeid} {e.key} "
        f"{e.old} -> {e.new}" + ("" if e.regression else " (different seeds, within 10%)")
        for e in diff.evidence
    ]
    lines.append(f"{diff.regressions} regression(s)" if diff.regressions else "no regressions")
    return "\n".join(lines) + "\n"


def render_diff_json(diff: ReportDiff) -> str:
    return json.dumps(diff.to_json(), indent=2, default=str) + "\n"
