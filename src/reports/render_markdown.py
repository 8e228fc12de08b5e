"""The Markdown rendering: fits a GitHub job summary; the same first screen as the HTML.

The ceiling and what holds it, the run's bar, the milestones (ranges), the items not
passing with why and what to do, then the passing ones with one evidence line per
check (raw JSON behind a ``<details>`` disclosure, which GitHub renders).
"""

from __future__ import annotations

import json

from reports.first_screen import Section, bar_line, check_lines, milestone_lines, sections_of
from reports.model import GateReport, GateStatus
from reports.sensitivity_text import sensitivity_line

_ICON = {
    GateStatus.PASS: "✅",
    GateStatus.FAIL: "❌",
    GateStatus.ERROR: "💥",
    GateStatus.MISSING: "⬜",
    GateStatus.NOT_RUN: "⏭️",
}


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _not_passing(section: Section) -> list[str]:
    total = len(section.not_passing) + len(section.passing)
    lines = ["", f"## {section.title} not passing ({len(section.not_passing)} of {total})", ""]
    if not section.not_passing:
        return [*lines, f"Every {section.noun} passes."]
    lines += ["| Status | M | Gate | Why | What to do |", "| --- | --- | --- | --- | --- |"]
    lines += [
        f"| {_ICON[i.status]} {i.status.value} | M{i.milestone} | `{i.id}` {_cell(i.title)} | "
        f"{_cell(i.why)} | {_cell(i.todo)} |"
        for i in section.not_passing
    ]
    return lines


def _passing(section: Section) -> list[str]:
    if not section.passing:
        return []
    lines = ["", f"## {section.title} passing ({len(section.passing)})", ""]
    for item in section.passing:
        lines.append(
            f"- ✅ `{item.id}` (M{item.milestone}) {item.title}: "
            f"{_n(len(item.result.checks), 'check')}"
        )
        for check, summary in check_lines(item.result.checks):
            lines.append(f"  - `{check.nodeid}`: {summary}")
        evidence = {c.nodeid: c.evidence for c in item.result.checks if c.evidence}
        if evidence:
            raw = json.dumps(evidence, indent=2, sort_keys=True)
            lines += [
                "",
                "  <details><summary>raw evidence</summary>",
                "",
                "  ```json",
                *(f"  {line}" for line in raw.splitlines()),
                "  ```",
                "",
                "  </details>",
                "",
            ]
    return lines


def _provenance(report: GateReport) -> list[str]:
    p = report.run.provenance
    if p is None:
        return []
    untracked = f" · **untracked: {', '.join(p.untracked)}**" if p.untracked else ""
    return [
        f"Provenance: catalog `{p.catalog_sha256[:12]}` · milestones `{p.ledger_sha256[:12]}`"
        f"{' (shipped)' if p.ledger_shipped else ''} · {len(p.check_files)} check files "
        f"digested · {len(p.inventory)} bound checks collected{untracked} "
        "(`scheduling-gates verify --checkout DIR` recomputes them)",
        "",
    ]


def render_markdown(report: GateReport) -> str:
    run, ceiling, bar = report.run, report.ceiling, report.requirements
    held = f"held by M{ceiling.held_by}: {ceiling.reason}" if ceiling.held_by else ceiling.reason
    verdict = "" if not bar.is_set else ("✅ " if bar.met else "❌ ")
    lines = [
        "# Scheduling gate report",
        "",
        f"**Verified gate ceiling: {ceiling.label}** ({held})",
        "",
        f"{verdict}**{bar_line(bar, ceiling, report.milestones)}**",
        "",
        "**Milestones**",
        "",
        *(f"- {m.text}" for m in milestone_lines(report.milestones)),
        "",
        " · ".join(f"{_ICON[GateStatus(k)]} {k} {v}" for k, v in report.summary.items()),
    ]
    sections = sections_of(report)
    for section in sections:
        lines += _not_passing(section)
    for section in sections:
        lines += _passing(section)
    lines += _rules(report)
    lines += [
        "",
        "## Run",
        "",
        f"Commit `{run.commit or 'unknown'}`{' (dirty)' if run.commit_dirty else ''} · "
        f"profile `{run.profile}` · seed `{run.seed}` · PostgreSQL "
        f"{run.postgres.version or 'unavailable'} ({run.postgres.source or 'none'}) · "
        f"tzdata {run.tzdata or 'unknown'} · Python {run.python} · {run.duration_s:.1f} s · "
        f"command `{run.command}`",
        "",
        *_provenance(report),
        sensitivity_line(run.sensitivity),
        "",
    ]
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
