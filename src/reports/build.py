"""Assemble a GateReport from the catalog, the ledger and the checks' results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from gates.catalog import Catalog
from gates.catalog.ledger import Ledger
from reports.evaluate import compute_ceiling, evaluate_facets, gate_status, milestone_results
from reports.model import CheckResult, GateReport, GateResult, GateStatus, RunMetadata


def reproduce_command(gate_id: str, seed: int, profile: str) -> str:
    return f"scheduling-gates run --gate {gate_id} --seed {seed} --profile {profile}"


def build_gate_results(
    catalog: Catalog,
    selected: set[str],
    checks_by_gate: Mapping[str, Sequence[CheckResult]],
    seed: int,
    profile: str,
) -> list[GateResult]:
    """One result per catalog gate, in catalog order."""
    results = []
    for gate in catalog:
        is_selected = gate.id in selected
        checks = list(checks_by_gate.get(gate.id, [])) if is_selected else []
        facets = evaluate_facets(gate, checks)
        status, detail = gate_status(is_selected, facets)
        results.append(
            GateResult(
                id=gate.id,
                milestone=gate.milestone,
                kind=gate.kind.value,
                title=gate.title,
                statement=gate.statement,
                selected=is_selected,
                status=status,
                detail=detail,
                facets=facets,
                checks=checks,
                reproduce=reproduce_command(gate.id, seed, profile),
            )
        )
    return results


def summarize(gates: Sequence[GateResult]) -> dict[str, int]:
    counts = Counter(g.status for g in gates)
    return {s.value: counts.get(s, 0) for s in GateStatus}


def build_report(
    catalog: Catalog, ledger: Ledger, gates: list[GateResult], run: RunMetadata
) -> GateReport:
    milestones = milestone_results(catalog, {g.id: g.status for g in gates}, ledger)
    return GateReport(
        run=run,
        ceiling=compute_ceiling(milestones),
        milestones=milestones,
        gates=gates,
        summary=summarize(gates),
    )
