"""Derive gate statuses, milestone states and the verified gate ceiling from checks.

These functions are the only place the rules live; the runner uses them to build a
report and ``verify`` uses them to recompute one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from catalog import Catalog, Gate
from catalog.milestones import Milestones, MilestoneStatus
from reports.model import (
    Ceiling,
    CheckOutcome,
    CheckResult,
    FacetResult,
    GateStatus,
    MilestoneResult,
    MilestoneState,
    Requirements,
)

UNKNOWN_NOTE = "neither verified by this suite nor in the declared milestones"
# What a report made before the rename (ADR 2210) says in its notes and the ceiling's
# reason: the same claims, so verify reads them as today's words (ADR 2360).
_FORMER_WORDS = (
    ("neither verified by this suite nor listed in the ledger", UNKNOWN_NOTE),
    ("the milestone ledger says", "the declared milestones say"),
    ("(not in the suite or the ledger)", "(not in the suite or the declared milestones)"),
)


def in_current_words(text: str) -> str:
    """``text`` with the former milestone-ledger phrases in today's words."""
    for former, current in _FORMER_WORDS:
        text = text.replace(former, current)
    return text


# When facets disagree, the worst one names the gate's status.
_WORST_FIRST = (GateStatus.FAIL, GateStatus.ERROR, GateStatus.MISSING, GateStatus.PASS)


def facet_status(checks: Sequence[CheckResult]) -> GateStatus:
    """A facet passes only if it has checks and every one of them passed."""
    if not checks:
        return GateStatus.MISSING
    outcomes = {c.outcome for c in checks}
    if CheckOutcome.FAILED in outcomes:
        return GateStatus.FAIL
    if outcomes & {CheckOutcome.ERROR, CheckOutcome.SKIPPED}:
        return GateStatus.ERROR
    return GateStatus.PASS


def evaluate_facets(gate: Gate, checks: Sequence[CheckResult]) -> list[FacetResult]:
    return [
        FacetResult(
            name=facet,
            status=facet_status([c for c in checks if c.facet == facet]),
            checks=[c.nodeid for c in checks if c.facet == facet],
        )
        for facet in gate.facets
    ]


def gate_status(selected: bool, facets: Sequence[FacetResult]) -> tuple[GateStatus, str]:
    """The gate's status and a one-line reason for it."""
    if not selected:
        return GateStatus.NOT_RUN, "filtered out of this run"
    by_status = {f.status for f in facets}
    for status in _WORST_FIRST:
        if status in by_status:
            break
    names = [f.name for f in facets if f.status == status]
    reasons = {
        GateStatus.FAIL: "a check failed",
        GateStatus.ERROR: "a check could not run or did not cover its claim",
        GateStatus.MISSING: "no check is bound",
        GateStatus.PASS: "every bound check passed",
    }
    where = (
        "" if names == ["check"] or status == GateStatus.PASS else f" (facet: {', '.join(names)})"
    )
    return status, reasons[status] + where


def milestone_results(
    catalog: Catalog, statuses: dict[str, GateStatus], declared: Milestones
) -> list[MilestoneResult]:
    """Every milestone from 1 to the highest known one, with its state."""
    suite = catalog.milestones()
    highest = max([*suite, *declared.entries])
    results = []
    for number in range(1, highest + 1):
        if number in suite:
            gates = catalog.in_milestone(number)
            passing = sum(1 for g in gates if statuses[g.id] == GateStatus.PASS)
            state = MilestoneState.COMPLETE if passing == len(gates) else MilestoneState.INCOMPLETE
            results.append(
                MilestoneResult(
                    number=number,
                    source="suite",
                    state=state,
                    gates_total=len(gates),
                    gates_passing=passing,
                )
            )
        elif (entry := declared.get(number)) is not None:
            state = {
                MilestoneStatus.COMPLETE: MilestoneState.COMPLETE,
                MilestoneStatus.IN_PROGRESS: MilestoneState.IN_PROGRESS,
                MilestoneStatus.NOT_STARTED: MilestoneState.NOT_STARTED,
            }[entry.status]
            results.append(
                MilestoneResult(number=number, source="ledger", state=state, note=entry.source)
            )
        else:
            results.append(
                MilestoneResult(
                    number=number,
                    source="none",
                    state=MilestoneState.UNKNOWN,
                    note=UNKNOWN_NOTE,
                )
            )
    return results


def compute_ceiling(milestones: Iterable[MilestoneResult]) -> Ceiling:
    """The highest milestone such that it and every earlier milestone is complete."""
    reached = 0
    for m in sorted(milestones, key=lambda m: m.number):
        if m.state != MilestoneState.COMPLETE:
            label = f"M{reached}" if reached else "none"
            if m.source == "suite":
                why = f"{m.gates_passing} of {m.gates_total} gates pass"
            elif m.source == "ledger":
                why = f"the declared milestones say {m.state.value.replace('_', ' ')}"
            else:
                why = "its status is unknown (not in the suite or the declared milestones)"
            return Ceiling(
                milestone=reached,
                label=label,
                held_by=m.number,
                reason=f"M{m.number} is not complete: {why}",
            )
        reached = m.number
    return Ceiling(
        milestone=reached,
        label=f"M{reached}" if reached else "none",
        held_by=None,
        reason="every known milestone is complete",
    )


def requirements_met(
    bar: Requirements, ceiling: Ceiling, milestones: Iterable[MilestoneResult]
) -> bool | None:
    """Whether the run met its ``--require-*`` bar; None when no bar was set."""
    if not bar.is_set:
        return None
    complete = {m.number for m in milestones if m.state == MilestoneState.COMPLETE}
    ceiling_ok = bar.ceiling is None or ceiling.milestone >= bar.ceiling
    return ceiling_ok and set(bar.complete) <= complete
