"""Merge the partial reports of one sharded run (``run --shard K/N``) into one report.

The merged report is built from the parts' check results by the same functions a
single run uses, so its statuses, ceiling, rules and provenance equal a single run's
with the same seed on the same commit. Parts that could not come from one run are
refused with a stable code (``MergeError.code``): different seeds, commits, catalogs,
milestone files, check files, selections or bars, a shard given twice or missing, or checks
that no part ran or that two parts ran.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog import Catalog
from catalog.milestones import Milestones
from catalog.rules import load_rules
from reports.build import build_gate_results, build_report, build_rule_results
from reports.model import (
    CheckResult,
    GateReport,
    GateResult,
    RuleResult,
    RunMetadata,
    ShardInfo,
    ShardRun,
)

HARNESS_PREFIX = "<collection of "
# Words of a part's command that differ between the parts of one run.
_PART_FLAGS = ("--shard", "--output")


class MergeError(Exception):
    """Parts that cannot be merged; ``code`` is stable (``gates.merge.*``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Part:
    path: Path
    report: GateReport

    @property
    def shard(self) -> ShardInfo:
        assert self.report.run.shard is not None
        return self.report.run.shard


def single_run_command(command: str) -> str:
    """A part's command without its ``--shard`` and ``--output``: the single run."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    out: list[str] = []
    it = iter(words)
    for word in it:
        if word == "--":
            out += [word, *it]
            break
        flag, eq, _ = word.partition("=")
        if flag in _PART_FLAGS:
            if not eq:
                next(it, None)
            continue
        out.append(word)
    return shlex.join(out)


def merge_parts(
    parts: Sequence[Part], catalog: Catalog, declared: Milestones, ledger_sha: str
) -> GateReport:
    """The merged report of ``parts``; raises MergeError when they are not one run.
    ``declared`` are the milestones to evaluate with; ``ledger_sha`` its digest."""
    ordered = _check_shards(parts)
    first = ordered[0].report.run
    _same(ordered, "gates.merge.seed_mismatch", "seeds", lambda r: r.seed)
    _same(ordered, "gates.merge.commit_mismatch", "commits", lambda r: (r.commit, r.commit_dirty))
    _same(ordered, "gates.merge.catalog_mismatch", "catalog digests", _provenance("catalog_sha256"))
    _same(ordered, "gates.merge.ledger_mismatch", "milestone files", _ledger_of)
    _same(ordered, "gates.merge.checks_mismatch", "check files", _provenance("check_files"))
    _same(ordered, "gates.merge.checks_mismatch", "inventories", _inventory_of)
    _same(ordered, "gates.merge.checks_mismatch", "check directories", _provenance("checks_dir"))
    _same(ordered, "gates.merge.checks_mismatch", "untracked files", _provenance("untracked"))
    _same(ordered, "gates.merge.commit_mismatch", "product trees", _provenance("product_sha256"))
    _same(ordered, "gates.merge.run_mismatch", "dependencies", _provenance("dependencies_sha256"))
    for name in ("profile", "selection", "tool_version", "python", "tzdata"):
        _same(ordered, "gates.merge.run_mismatch", name, _field(name))
    _same(ordered, "gates.merge.run_mismatch", "commands", lambda r: single_run_command(r.command))
    _same_bar(ordered)
    assert first.provenance is not None
    if first.provenance.ledger_sha256 != ledger_sha:
        raise MergeError(
            "gates.merge.ledger_mismatch",
            "the parts ran with another milestone file than the one given: "
            "pass the parts' --milestone-file",
        )
    checks = _checks(ordered)
    report = ordered[0].report
    selected = {g.id for g in report.gates if g.selected}
    rules_selected = any(r.selected for r in report.rules)
    gate_results = build_gate_results(catalog, selected, checks, first.seed, first.profile)
    rule_results = build_rule_results(load_rules(), rules_selected, checks)
    run = _run(ordered)
    return build_report(catalog, declared, gate_results, run, report.requirements, rule_results)


def _check_shards(parts: Sequence[Part]) -> list[Part]:
    if not parts:
        raise MergeError("gates.merge.no_parts", "give at least one partial report")
    for part in parts:
        if part.report.run.shard is None:
            raise MergeError(
                "gates.merge.not_a_part",
                f"{part.path} is not a partial report (it has no run.shard; "
                "write parts with scheduling-gates run --shard K/N)",
            )
    totals = sorted({p.shard.total for p in parts})
    if len(totals) != 1:
        raise MergeError(
            "gates.merge.shard_total_mismatch", f"the parts split the run in {totals} shards"
        )
    total = totals[0]
    by_index: dict[int, Part] = {}
    for part in parts:
        earlier = by_index.get(part.shard.index)
        if earlier is not None:
            raise MergeError(
                "gates.merge.shard_overlap",
                f"shard {part.shard.index}/{total} given twice ({earlier.path}, {part.path})",
            )
        by_index[part.shard.index] = part
    missing = [f"{k}/{total}" for k in range(1, total + 1) if k not in by_index]
    if missing:
        raise MergeError("gates.merge.shard_missing", f"shard(s) {', '.join(missing)} missing")
    return [by_index[k] for k in range(1, total + 1)]


def _provenance(name: str) -> Callable[[RunMetadata], Any]:
    def read(run: RunMetadata) -> Any:
        return None if run.provenance is None else getattr(run.provenance, name)

    return read


def _field(name: str) -> Callable[[RunMetadata], Any]:
    def read(run: RunMetadata) -> Any:
        return getattr(run, name)

    return read


def _ledger_of(run: RunMetadata) -> Any:
    p = run.provenance
    return (run.ledger, None if p is None else (p.ledger_sha256, p.ledger_shipped))


def _inventory_of(run: RunMetadata) -> Any:
    return None if run.provenance is None else [e.model_dump() for e in run.provenance.inventory]


def _same(parts: Sequence[Part], code: str, what: str, value: Callable[[RunMetadata], Any]) -> None:
    seen = [value(p.report.run) for p in parts]
    if any(v != seen[0] for v in seen):
        shown = ", ".join(
            f"{p.shard.index}/{p.shard.total}: {_short(v)}"
            for p, v in zip(parts, seen, strict=True)
        )
        raise MergeError(code, f"the parts differ in {what} ({shown})")


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _same_bar(parts: Sequence[Part]) -> None:
    bars = [(p.report.requirements.ceiling, p.report.requirements.complete) for p in parts]
    if any(b != bars[0] for b in bars):
        raise MergeError(
            "gates.merge.run_mismatch", f"the parts were held to different bars {bars}"
        )


def _recorded(report: GateReport) -> list[tuple[str, CheckResult]]:
    verdicts: list[GateResult | RuleResult] = [*report.gates, *report.rules]
    return [(v.id, c) for v in verdicts for c in v.checks]


def _checks(parts: Sequence[Part]) -> dict[str, list[CheckResult]]:
    """Every part's checks by gate or rule id, in inventory order (as a single run)."""
    owner: dict[str, int] = {}
    for part in parts:
        ran = {
            c.nodeid for _, c in _recorded(part.report) if not c.nodeid.startswith(HARNESS_PREFIX)
        }
        if ran != set(part.shard.checks):
            raise MergeError(
                "gates.merge.part_inconsistent",
                f"{part.path}: its checks are not the ones its shard lists",
            )
        twice = sorted(n for n in ran if n in owner)
        if twice:
            raise MergeError("gates.merge.shard_overlap", f"checks in more than one part: {twice}")
        owner |= dict.fromkeys(ran, part.shard.index)
    report = parts[0].report
    chosen = {g.id for g in report.gates if g.selected} | {r.id for r in report.rules if r.selected}
    provenance = report.run.provenance
    inventory = [] if provenance is None else provenance.inventory
    expected = {e.nodeid for e in inventory if e.gate in chosen}
    unran = sorted(expected - set(owner))
    if unran:
        raise MergeError("gates.merge.shard_missing", f"bound checks no part ran: {unran}")
    stray = sorted(set(owner) - expected)
    if stray:
        raise MergeError("gates.merge.part_inconsistent", f"checks no collection bound: {stray}")
    position = {e.nodeid: i for i, e in enumerate(inventory)}
    by_id: dict[str, list[CheckResult]] = {}
    seen: set[tuple[str, str]] = set()
    for part in parts:
        for verdict_id, check in _recorded(part.report):
            key = (check.nodeid, check.facet)
            if key in seen:  # a harness ERROR every part recorded alike
                continue
            seen.add(key)
            by_id.setdefault(verdict_id, []).append(check)
    for checks in by_id.values():
        checks.sort(key=lambda c: position.get(c.nodeid, len(position)))
    return by_id


def _run(parts: Sequence[Part]) -> RunMetadata:
    runs = [p.report.run for p in parts]
    first = runs[0]
    exits = [r.pytest_exit_code for r in runs if r.pytest_exit_code is not None]
    return first.model_copy(
        update={
            "started_at": min(r.started_at for r in runs),
            "finished_at": max(r.finished_at for r in runs),
            # The slowest part: the wall time of the run when the parts run side by side.
            "duration_s": max(r.duration_s for r in runs),
            "command": single_run_command(first.command),
            "pytest_exit_code": max(exits) if exits else None,
            "shard": None,
            "shards": [
                ShardRun(
                    index=p.shard.index,
                    total=p.shard.total,
                    checks=len(p.shard.checks),
                    started_at=r.started_at,
                    finished_at=r.finished_at,
                    duration_s=r.duration_s,
                    platform=r.platform,
                    postgres=r.postgres,
                    command=r.command,
                    pytest_exit_code=r.pytest_exit_code,
                )
                for p, r in zip(parts, runs, strict=True)
            ],
        }
    )
