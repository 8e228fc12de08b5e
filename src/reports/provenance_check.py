"""Refuse a report whose checks, selection or milestone file do not match where it says
it came from (its recorded provenance, and optionally a checkout of the commit)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from catalog import Catalog
from catalog.provenance import (
    SHIPPED_CATALOG,
    SHIPPED_MILESTONES,
    check_file_digests,
    gate_markers,
    head_commit,
    milestones_digest,
    nodeid_function,
    sha256_file,
    sha256_text,
    shipped_file_in,
    shipped_text,
)
from reports.model import CheckOutcome, GateReport, GateResult, Provenance, RuleResult
from reports.origin import (
    PRODUCT_RELATIVE,
    dependency_changes,
    dependency_digest,
    dependency_set,
    product_tree_digest,
    tracked_changes,
)

HARNESS_ERROR_PREFIX = "<collection of "


@dataclass(frozen=True)
class VerifyContext:
    """What the verifier itself holds: the milestone file it was given (None: shipped) and,
    optionally, a checkout to recompute digests from."""

    milestones_path: Path | None = None
    shipped_milestones_origin: str = ""
    checkout: Path | None = None
    allow_dirty: bool = False  # accept a run on (or a checkout with) uncommitted changes
    # The environment's dependency set (reports.origin.dependency_set()); None: read it.
    dependencies: list[str] | None = None


def provenance_problems(report: GateReport, catalog: Catalog, ctx: VerifyContext) -> list[str]:
    p = report.run.provenance
    if p is None:
        return ["the report records no provenance (catalog, milestone file and check digests)"]
    problems: list[str] = []
    problems += _catalog_and_ledger(report, p, ctx)
    problems += _checks_match_inventory(report, p)
    problems += _selection(report, catalog)
    if p.untracked and report.run.commit_dirty is not True:
        problems.append(
            f"untracked files under the checks were collected ({p.untracked}) "
            "but the report says the commit is clean"
        )
    problems += _origin(report, p, ctx)
    if ctx.checkout is not None:
        problems += _against_checkout(report, p, ctx.checkout)
        problems += _checkout_origin(p, ctx)
    return problems


def _origin(report: GateReport, p: Provenance, ctx: VerifyContext) -> list[str]:
    """The product-tree and dependency digests are recorded and consistent, the
    dependencies are this environment's, and the run was on a clean tree."""
    problems = []
    if report.run.commit_dirty is True and not ctx.allow_dirty:
        problems.append(
            "the report's run was on a dirty tree (commit_dirty): its commit does not say"
            " what ran; pass --allow-dirty to accept it anyway"
        )
    if p.product_sha256 is None or p.dependencies is None or p.dependencies_sha256 is None:
        return [*problems, "the report records no product-tree or dependency digest"]
    if dependency_digest(p.dependencies) != p.dependencies_sha256:
        problems.append("the report's dependency digest is not the digest of its dependencies")
    installed = dependency_set() if ctx.dependencies is None else ctx.dependencies
    changes = dependency_changes(p.dependencies, installed)
    if changes:
        shown = "; ".join(changes[:5]) + (
            f"; and {len(changes) - 5} more" if len(changes) > 5 else ""
        )
        problems.append(
            f"the run's dependencies are not this environment's ({len(changes)} differ: {shown})"
        )
    return problems


def _checkout_origin(p: Provenance, ctx: VerifyContext) -> list[str]:
    assert ctx.checkout is not None
    checkout = ctx.checkout.resolve()
    problems = []
    if p.product_sha256 is not None and product_tree_digest(checkout) != p.product_sha256:
        problems.append(
            f"the product tree in {checkout} ({PRODUCT_RELATIVE}) is not the one the report's"
            " run used"
        )
    changed = tracked_changes(checkout)
    if changed and not ctx.allow_dirty:
        problems.append(
            f"the checkout {checkout} has uncommitted changes to {len(changed)} tracked"
            f" file(s) ({', '.join(line[3:] for line in changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''}); pass --allow-dirty to accept it anyway"
        )
    return problems


def _catalog_and_ledger(report: GateReport, p: Provenance, ctx: VerifyContext) -> list[str]:
    problems = []
    if p.catalog_sha256 != sha256_text(shipped_text(SHIPPED_CATALOG)):
        problems.append("the report's catalog digest is not the catalog's")
    names_shipped = report.run.ledger == ctx.shipped_milestones_origin
    if p.ledger_shipped != names_shipped:
        problems.append("the report's milestone file name and its shipped-milestones flag disagree")
    shipped = milestones_digest(None)
    if (p.ledger_shipped or names_shipped) and p.ledger_sha256 != shipped:
        problems.append(
            "the report names the shipped milestone file but its digest is another file's"
        )
    used = milestones_digest(ctx.milestones_path)
    if p.ledger_sha256 != used:
        problems.append(
            "the run's milestone file is not the one verify used "
            f"(run {p.ledger_sha256[:12]}, verify {used[:12]}): pass the run's --milestone-file"
        )
    return problems


def _checks_match_inventory(report: GateReport, p: Provenance) -> list[str]:
    problems = []
    inventory: dict[str, set[tuple[str, str]]] = {}
    for entry in p.inventory:
        inventory.setdefault(entry.gate, set()).add((entry.nodeid, entry.facet))
        path, _ = nodeid_function(entry.nodeid)
        if path not in p.check_files:
            problems.append(f"{entry.nodeid}: its file has no recorded digest")
    verdicts: list[GateResult | RuleResult] = [*report.gates, *report.rules]
    for gate in verdicts:
        if not gate.selected:
            continue
        recorded = {(c.nodeid, c.facet) for c in gate.checks}
        harness = all(
            c.nodeid.startswith(HARNESS_ERROR_PREFIX) and c.outcome is CheckOutcome.ERROR
            for c in gate.checks
        )
        if not p.inventory and gate.checks and harness:
            continue  # collection broke: every facet ERROR, nothing was collected
        expected = inventory.get(gate.id, set())
        invented = sorted(n for n, _ in recorded - expected)
        dropped = sorted(n for n, _ in expected - recorded)
        if invented:
            problems.append(f"{gate.id}: checks no collection produced: {invented}")
        if dropped:
            problems.append(f"{gate.id}: collected checks missing from the report: {dropped}")
    return problems


def _selection(report: GateReport, catalog: Catalog) -> list[str]:
    chosen = report.run.selection
    gate_ids = chosen.get("gates", [])
    milestones = [int(m.upper().removeprefix("M")) for m in chosen.get("milestones", [])]
    if gate_ids or milestones:
        expected = set(gate_ids) | {
            g.id for m in milestones for g in catalog.in_milestone(m) if g.id in catalog
        }
    else:
        expected = set(catalog.ids)
    actual = {g.id for g in report.gates if g.selected}
    problems = []
    if expected != actual:
        problems.append(
            "the gates marked selected do not follow from the recorded selection "
            f"({len(actual)} selected, the selection gives {len(expected)})"
        )
    command = _command_selection(report.run.command)
    if command is not None and command != (sorted(gate_ids), sorted(milestones)):
        problems.append("the recorded selection contradicts the recorded command")
    return problems


def _command_selection(command: str) -> tuple[list[str], list[int]] | None:
    """The ``--gate``/``--milestone`` values of a ``scheduling-gates run`` command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:2] != ["scheduling-gates", "run"]:
        return None
    gates: list[str] = []
    milestones: list[int] = []
    it = iter(words[2:])
    for word in it:
        if word == "--":
            break
        flag, eq, value = word.partition("=")
        if flag not in ("--gate", "--milestone"):
            continue
        if not eq:
            value = next(it, "")
        if flag == "--gate":
            gates.append(value)
        else:
            digits = value.upper().removeprefix("M")
            if digits.isdigit():
                milestones.append(int(digits))
    return sorted(gates), sorted(set(milestones))


def _against_checkout(report: GateReport, p: Provenance, checkout: Path) -> list[str]:
    checkout = checkout.resolve()
    problems = []
    catalog_file = shipped_file_in(checkout, SHIPPED_CATALOG)
    if not catalog_file.is_file() or sha256_file(catalog_file) != p.catalog_sha256:
        problems.append(f"the catalog in {checkout} is not the one the report records")
    ledger_file = shipped_file_in(checkout, SHIPPED_MILESTONES)
    if p.ledger_shipped and (
        not ledger_file.is_file() or sha256_file(ledger_file) != p.ledger_sha256
    ):
        problems.append(
            f"the shipped milestone file in {checkout} is not the one the report records"
        )
    checks_dir = checkout / p.checks_dir
    actual = check_file_digests(checks_dir, checkout) if checks_dir.is_dir() else {}
    for path in sorted(set(p.check_files) | set(actual)):
        if path not in actual:
            problems.append(f"{path}: recorded in the report, absent from the checkout")
        elif path not in p.check_files:
            problems.append(f"{path}: in the checkout's checks, absent from the report")
        elif actual[path] != p.check_files[path]:
            problems.append(f"{path}: differs from the file the report's run collected")
    markers = set()
    for path in actual:
        if Path(path).name.startswith("test_") and path.endswith(".py"):
            markers |= {(m.path, m.function, m.gate) for m in gate_markers(checkout / path, path)}
    collected = {(*nodeid_function(e.nodeid), e.gate) for e in p.inventory}
    for path, function, gate in sorted(markers - collected):
        problems.append(f"{path}::{function} is bound to {gate} in the checkout, not collected")
    for path, function, gate in sorted(collected - markers):
        problems.append(f"{path}::{function} is not bound to {gate} in the checkout")
    head = head_commit(checkout)
    if (
        report.run.commit
        and head
        and report.run.commit_dirty is False
        and head != report.run.commit
    ):
        problems.append(
            f"the checkout is at {head[:12]}, the report's run at {report.run.commit[:12]}"
        )
    return problems
