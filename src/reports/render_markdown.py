"""The Markdown rendering: fits a GitHub job summary; the ceiling first."""

from __future__ import annotations

from reports.model import GateReport, GateStatus, MilestoneState

_ICON = {
    GateStatus.PASS: "✅",
    GateStatus.FAIL: "❌",
    GateStatus.ERROR: "💥",
    GateStatus.MISSING: "⬜",
    GateStatus.NOT_RUN: "⏭️",
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _provenance(report: GateReport) -> list[str]:
    p = report.run.provenance
    if p is None:
        return []
    untracked = f" · **untracked: {', '.join(p.untracked)}**" if p.untracked else ""
    return [
        f"Provenance: catalog `{p.catalog_sha256[:12]}` · ledger `{p.ledger_sha256[:12]}`"
        f"{' (shipped)' if p.ledger_shipped else ''} · {len(p.check_files)} check files "
        f"digested · {len(p.inventory)} bound checks collected{untracked} "
        "(`scheduling-gates verify --checkout DIR` recomputes them)",
        "",
    ]


def render_markdown(report: GateReport) -> str:
    run, ceiling = report.run, report.ceiling
    lines = [
        "# Scheduling gate report",
        "",
        f"**Verified gate ceiling: {ceiling.label}**"
        + (f" — held by M{ceiling.held_by}. {ceiling.reason}." if ceiling.held_by else "."),
        "",
        " · ".join(f"{_ICON[GateStatus(k)]} {k} {v}" for k, v in report.summary.items()),
        "",
        f"Commit `{run.commit or 'unknown'}`{' (dirty)' if run.commit_dirty else ''} · "
        f"profile `{run.profile}` · seed `{run.seed}` · PostgreSQL "
        f"{run.postgres.version or 'unavailable'} ({run.postgres.source or 'none'}) · "
        f"tzdata {run.tzdata or 'unknown'} · Python {run.python} · {run.duration_s:.1f} s",
        "",
        *_provenance(report),
        "## Milestones",
        "",
        "| Milestone | Verified by | State | Gates passing |",
        "| --- | --- | --- | --- |",
    ]
    for m in report.milestones:
        gates = f"{m.gates_passing}/{m.gates_total}" if m.source == "suite" else "—"
        state = m.state.value.replace("_", " ")
        if m.state == MilestoneState.COMPLETE:
            state = f"**{state}**"
        source = {"suite": "this suite", "ledger": "ledger", "none": "—"}[m.source]
        lines.append(f"| M{m.number} | {source} | {state} | {gates} |")
    failing = [g for g in report.gates if g.status != GateStatus.PASS]
    lines += ["", f"## Gates not passing ({len(failing)} of {len(report.gates)})", ""]
    if failing:
        lines += ["| Gate | M | Status | Why | Reproduce |", "| --- | --- | --- | --- | --- |"]
        for g in failing:
            lines.append(
                f"| `{g.id}` | M{g.milestone} | {_ICON[g.status]} {g.status.value} | "
                f"{_cell(g.detail)} | `{g.reproduce}` |"
            )
    else:
        lines.append("Every gate passes.")
    passing = [g for g in report.gates if g.status == GateStatus.PASS]
    if passing:
        lines += ["", "## Passing gates", ""]
        lines += [f"- `{g.id}` (M{g.milestone}, {len(g.checks)} checks)" for g in passing]
    lines += _rules(report)
    lines.append("")
    return "\n".join(lines)


def _rules(report: GateReport) -> list[str]:
    if not report.rules:
        return []
    lines = [
        "",
        "## Spec rules beyond the gates (not part of the ceiling)",
        "",
        "| Rule | Status | Checks | Why |",
        "| --- | --- | --- | --- |",
    ]
    for r in report.rules:
        lines.append(
            f"| `{r.id}` | {_ICON[r.status]} {r.status.value} | {len(r.checks)} | "
            f"{_cell(r.detail)} |"
        )
    return lines
