"""The gate runner: collect bound checks, run them through pytest, write the report."""

from __future__ import annotations

import json
import os
import platform
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from catalog import Catalog, load_catalog
from catalog.milestones import load_milestones
from catalog.provenance import (
    check_file_digests,
    head_commit,
    milestones_digest,
    sha256_text,
    shipped_text,
    untracked_files,
)
from catalog.rules import load_rules
from gates.runner.inventory import BoundCheck, default_checks_dir, plugin_args, project_root
from gates.runner.sensitivity import latest_sensitivity
from gates.runner.shard import Shard, shard_checks
from reports.build import build_gate_results, build_report, build_rule_results
from reports.model import (
    CheckOutcome,
    CheckResult,
    GateReport,
    InventoryEntry,
    PostgresInfo,
    Provenance,
    Requirements,
    RunMetadata,
    ShardInfo,
)
from reports.origin import (
    dependency_digest,
    dependency_set,
    product_tree_digest,
    tracked_changes,
)
from reports.writer import write_part, write_reports
from scheduling.testing import SystemClock
from scheduling.tzdata_info import tzdata_version
from simulation.provider import ServerInfo

Profile = Literal["quick", "deep"]
_STDERR_FD = 2  # the fd, not sys.stderr: under pytest that object may have no fileno


@dataclass
class RunOptions:
    checks_dir: Path
    output: Path
    gates: list[str] = field(default_factory=list)
    milestones: list[int] = field(default_factory=list)
    workers: str | None = None
    profile: Profile = "quick"
    seed: int | None = None
    milestone_file: Path | None = None  # the declared milestones; None: the shipped file
    require_ceiling: int | None = None
    require_complete: list[int] = field(default_factory=list)
    pytest_args: list[str] = field(default_factory=list)
    command: str = ""
    shard: Shard | None = None  # run only this deterministic part; write a partial report
    sensitivity: Path | None = None  # the mutate result to link; default reports/out/


class SelectionError(ValueError):
    """An unknown gate id or milestone was asked for."""


def select_gates(catalog: Catalog, gate_ids: Sequence[str], milestones: Sequence[int]) -> set[str]:
    """Gates named by id or by milestone; everything when neither is given."""
    unknown = [g for g in gate_ids if g not in catalog]
    if unknown:
        raise SelectionError(f"unknown gate id(s): {', '.join(unknown)}")
    missing = [m for m in milestones if m not in catalog.milestones()]
    if missing:
        raise SelectionError(
            f"milestone(s) {missing} have no gates in this suite "
            f"(suite milestones: {catalog.milestones()})"
        )
    if not gate_ids and not milestones:
        return set(catalog.ids)
    chosen = set(gate_ids)
    chosen |= {g.id for m in milestones for g in catalog.in_milestone(m)}
    return chosen


def run_gates(options: RunOptions) -> tuple[GateReport, int]:
    """Run the selected gates; return the report and the process exit code."""
    clock = SystemClock()
    started, t0 = clock.now(), time.perf_counter()
    catalog = load_catalog()
    declared = load_milestones(options.milestone_file, catalog.milestones())
    selected = select_gates(catalog, options.gates, options.milestones)
    rules = load_rules()
    # Rules run with the whole suite (no --gate/--milestone filter).
    rules_selected = not options.gates and not options.milestones
    chosen = selected | (set(rules) if rules_selected else set())
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**32)
    root = project_root(options.checks_dir)

    inventory: list[BoundCheck] = []
    bound: list[BoundCheck] = []
    # Digests and untracked files of the check directory as collected: before the
    # run, so a check that stages (or deletes) itself while it runs cannot hide.
    digests = check_file_digests(options.checks_dir.resolve(), root)
    untracked = untracked_files(options.checks_dir.resolve(), root)
    product = product_tree_digest(root)
    dependencies = dependency_set()
    commit = head_commit(root)
    dirty = _dirty(root)
    # One pytest process collects the inventory and runs the chosen checks (ADR 1710).
    outcome = _run_pytest(chosen, options, seed, _environment(options.profile, seed), root)
    pytest_exit = outcome.exit_code
    postgres = outcome.postgres
    if outcome.collection_error is not None:
        checks = _harness_error(catalog, selected, outcome.collection_error)
        pytest_exit = None
    else:
        inventory = outcome.inventory
        bound = [c for c in inventory if c.gate in chosen]
        if options.shard is not None:
            mine = set(shard_checks([c.nodeid for c in bound], options.shard))
            bound = [c for c in bound if c.nodeid in mine]
        checks = _merge(bound, outcome.results, pytest_exit)

    gate_results = build_gate_results(catalog, selected, checks, seed, options.profile)
    provenance = _provenance(options, root, inventory, digests, untracked).model_copy(
        update={
            "product_sha256": product,
            "dependencies": dependencies,
            "dependencies_sha256": dependency_digest(dependencies),
        }
    )
    if provenance.untracked:
        dirty = True  # collected files the commit does not hold
    run = RunMetadata(
        tool_version=_version("scheduling"),
        started_at=started,
        finished_at=clock.now(),
        duration_s=round(time.perf_counter() - t0, 3),
        commit=commit,
        commit_dirty=dirty,
        python=platform.python_version(),
        platform=platform.platform(),
        tzdata=_tzdata(),
        postgres=postgres,
        profile=options.profile,
        seed=seed,
        ledger=declared.origin,
        selection={
            "gates": sorted(options.gates),
            "milestones": [f"M{m}" for m in sorted(options.milestones)],
        },
        command=options.command,
        pytest_exit_code=pytest_exit,
        provenance=provenance,
        shard=_shard_info(options.shard, bound),
        sensitivity=latest_sensitivity(options.sensitivity, root),
    )
    bar = Requirements(
        ceiling=options.require_ceiling, complete=sorted(set(options.require_complete))
    )
    rule_results = build_rule_results(rules, rules_selected, checks)
    report = build_report(catalog, declared, gate_results, run, bar, rule_results)
    if options.shard is not None:
        # A part's statuses cover only its checks: no verdict, no bar until the merge.
        report = report.model_copy(update={"requirements": bar})
        write_part(report, options.output)
        return report, 0
    write_reports(report, options.output)
    return report, exit_code(report, selected, options.require_ceiling, options.require_complete)


def _shard_info(shard: Shard | None, bound: list[BoundCheck]) -> ShardInfo | None:
    if shard is None:
        return None
    return ShardInfo(index=shard.index, total=shard.total, checks=sorted({c.nodeid for c in bound}))


def exit_code(
    report: GateReport,
    selected: set[str],
    require_ceiling: int | None,
    require_complete: Sequence[int] = (),
) -> int:
    """0 when the run meets its bar: the required ceiling and the required complete
    milestones when either is given, else every selected gate PASS."""
    if require_ceiling is not None or require_complete:
        complete = {m.number for m in report.milestones if m.state.value == "complete"}
        ceiling_ok = require_ceiling is None or report.ceiling.milestone >= require_ceiling
        return 0 if ceiling_ok and set(require_complete) <= complete else 1
    failing = [g for g in report.gates if g.id in selected and g.status.value != "PASS"]
    return 1 if failing else 0


def _environment(profile: Profile, seed: int) -> dict[str, str]:
    env = dict(os.environ)
    env["SCHEDULING_GATE_PROFILE"] = profile
    env["SCHEDULING_GATE_SEED"] = str(seed)
    return env


@dataclass
class PytestOutcome:
    """What the one pytest process of a run left behind."""

    inventory: list[BoundCheck]
    results: dict[str, dict[str, Any]]
    exit_code: int | None
    postgres: PostgresInfo
    collection_error: str | None = None


def _run_pytest(
    chosen: set[str],
    options: RunOptions,
    seed: int,
    env: dict[str, str],
    root: Path,
) -> PytestOutcome:
    """Collect every check under the check directory (the inventory), deselect all but
    the bound checks of ``chosen`` (and of the shard), run them. PostgreSQL starts only
    when a check asks for it (the provider's fixtures; one server for every worker)."""
    with tempfile.TemporaryDirectory(prefix="gate-results-") as tmp:
        results_path = Path(tmp) / "results.json"
        inventory_path = Path(tmp) / "inventory.json"
        database_path = Path(tmp) / "database.json"
        shard = [options.shard.index, options.shard.total] if options.shard else None
        # Inline, not a file: pytest takes an existing path argument into its choice of
        # rootdir and configuration file.
        workers = default_workers(options)
        select = {"ids": sorted(chosen), "shard": shard, "longest_first": bool(workers)}
        select_arg = json.dumps(select, separators=(",", ":"))
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--rootdir={root}",  # node ids relative to the root, as the check digests are
            *plugin_args(),
            "--gate-inventory",
            str(inventory_path),
            f"--gate-select={select_arg}",
            "--gate-results",
            str(results_path),
            "--database-info",
            str(database_path),
            f"--hypothesis-seed={seed}",
            *(["-n", workers] if workers else []),
            *options.pytest_args,
            str(options.checks_dir),
        ]
        # pytest's progress goes to stderr: stdout carries only the verdict (scriptable).
        proc = subprocess.run(args, cwd=root, env=env, check=False, stdout=_STDERR_FD)
        postgres = _database_info(database_path)
        if not inventory_path.exists():
            return PytestOutcome(
                [],
                {},
                proc.returncode,
                postgres,
                f"pytest could not collect the gate checks (exit code {proc.returncode});"
                " its output is above",
            )
        inventory_data = json.loads(inventory_path.read_text(encoding="utf-8"))
        inventory = [
            BoundCheck(c["nodeid"], c["gate"], c["facet"]) for c in inventory_data["checks"]
        ]
        errors = inventory_data.get("errors") or []
        if errors:
            message = "pytest could not collect the gate checks:\n" + "\n".join(errors)
            return PytestOutcome([], {}, proc.returncode, postgres, message[-3000:])
        results: dict[str, dict[str, Any]] = {}
        if results_path.exists():
            data = json.loads(results_path.read_text(encoding="utf-8"))
            results = {r["nodeid"]: r for r in data["results"]}
    return PytestOutcome(inventory, results, proc.returncode, postgres)


def default_workers(options: RunOptions) -> str | None:
    """``-n`` as given; else two xdist workers for the whole shipped suite on a machine
    with two or more cores (a ``--gate``/``--milestone`` selection or another check
    directory runs in one process: too few checks to pay for the workers' start).
    ``-n 0`` runs in one process."""
    if options.workers is not None:
        return None if options.workers.strip() in ("0", "") else options.workers
    shipped = options.checks_dir.resolve() == default_checks_dir().resolve()
    whole = shipped and not options.gates and not options.milestones
    return "2" if whole and (os.cpu_count() or 1) >= 2 else None


def _database_info(path: Path) -> PostgresInfo:
    """The server the checks used (as the provider plugin recorded it), without secrets."""
    raw = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    if not raw:
        return PostgresInfo(error="not started: no selected check used PostgreSQL")
    info: dict[str, Any] = ServerInfo.from_dict(raw).redacted().to_dict()  # no password
    return PostgresInfo(
        source=str(info.get("source")),
        version=str(info.get("version")),
        durability={str(k): str(v) for k, v in dict(info.get("durability", {})).items()},
    )


def _merge(
    bound: list[BoundCheck], results: dict[str, dict[str, Any]], pytest_exit: int | None
) -> dict[str, list[CheckResult]]:
    """Each bound check's result; a check with no recorded result is an ERROR, never a pass."""
    by_gate: dict[str, list[CheckResult]] = {}
    for check in bound:
        raw = results.get(check.nodeid)
        if raw is None:
            result = CheckResult(
                nodeid=check.nodeid,
                facet=check.facet,
                outcome=CheckOutcome.ERROR,
                detail=f"no result recorded (pytest exit code {pytest_exit})",
            )
        else:
            result = CheckResult(
                nodeid=check.nodeid,
                facet=check.facet,
                outcome=CheckOutcome(raw["outcome"]),
                duration_s=float(raw["duration_s"]),
                detail=raw.get("detail"),
                evidence=raw.get("evidence") or {},
            )
        by_gate.setdefault(check.gate, []).append(result)
    return by_gate


def _harness_error(
    catalog: Catalog, selected: set[str], message: str
) -> dict[str, list[CheckResult]]:
    """Collection broke: every facet of every selected gate gets an ERROR result."""
    return {
        gate.id: [
            CheckResult(
                nodeid=f"<collection of {gate.id}>",
                facet=facet,
                outcome=CheckOutcome.ERROR,
                detail=message,
            )
            for facet in gate.facets
        ]
        for gate in catalog
        if gate.id in selected
    }


def _provenance(
    options: RunOptions,
    root: Path,
    inventory: list[BoundCheck],
    digests: dict[str, str],
    untracked_before: list[str] | None,
) -> Provenance:
    checks_dir = options.checks_dir.resolve()
    # Untracked before collection, plus any file that appeared during the run (a
    # conftest pytest loaded after the inventory was taken).
    after = untracked_files(checks_dir, root)
    untracked = (
        None
        if untracked_before is None and after is None
        else sorted(set(untracked_before or ()) | set(after or ()))
    )
    return Provenance(
        catalog_sha256=sha256_text(shipped_text("catalog.toml")),
        ledger_sha256=milestones_digest(options.milestone_file),
        ledger_shipped=options.milestone_file is None,
        checks_dir=checks_dir.relative_to(root).as_posix(),
        check_files=digests,
        untracked=untracked,
        inventory=[InventoryEntry(nodeid=c.nodeid, gate=c.gate, facet=c.facet) for c in inventory],
    )


def _tzdata() -> str | None:
    """The IANA release the product's zone authority uses (e.g. ``2026f``)."""
    try:
        return tzdata_version()
    except (ImportError, AttributeError):
        return None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _dirty(root: Path) -> bool | None:
    changes = tracked_changes(root)
    return None if changes is None else bool(changes)


def command_line(argv: Sequence[str]) -> str:
    return shlex.join(["scheduling-gates", *argv])
