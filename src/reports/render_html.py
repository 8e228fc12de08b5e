"""The HTML rendering: one self-contained page for release reviewers (no scripts, no CDN)."""

from __future__ import annotations

import json
from html import escape

from reports.model import GateReport, GateResult, GateStatus

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:72rem;
color:#1b1f24;padding:0 1rem}
h1{margin-bottom:.2rem}.meta{color:#57606a;font-size:13px}
.ceiling{font-size:1.6rem;padding:1rem 1.2rem;border-radius:8px;background:#f6f8fa;
border-left:6px solid #0969da;margin:1rem 0}
.ceiling small{display:block;font-size:14px;color:#57606a}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}
th,td{border-bottom:1px solid #d0d7de;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}code{font-size:13px}
.s{font-weight:600;padding:.05rem .45rem;border-radius:4px;font-size:12px;white-space:nowrap}
.PASS{background:#dafbe1;color:#116329}.FAIL{background:#ffebe9;color:#a40e26}
.ERROR{background:#fff1e5;color:#953800}.MISSING{background:#eaeef2;color:#424a53}
.NOT_RUN{background:#ddf4ff;color:#0550ae}
.complete{color:#116329;font-weight:600}
details{margin:.1rem 0}pre{background:#f6f8fa;padding:.5rem;overflow:auto;font-size:12px;
max-height:24rem}
"""


def _badge(status: GateStatus) -> str:
    return f'<span class="s {status.value}">{status.value}</span>'


def _gate_row(gate: GateResult) -> str:
    facets = "".join(
        f"<li>{escape(f.name)}: {_badge(f.status)} ({len(f.checks)} checks)</li>"
        for f in gate.facets
    )
    checks = "".join(
        f"<li><code>{escape(c.nodeid)}</code> — {escape(c.outcome.value)}"
        f" ({c.duration_s:.2f} s)"
        + (f"<pre>{escape(c.detail)}</pre>" if c.detail else "")
        + (
            f"<pre>{escape(json.dumps(c.evidence, indent=2, sort_keys=True))}</pre>"
            if c.evidence
            else ""
        )
        + "</li>"
        for c in gate.checks
    )
    return (
        f"<tr id='{escape(gate.id)}'><td>{_badge(gate.status)}</td>"
        f"<td>M{gate.milestone}</td><td>{escape(gate.kind)}</td><td>"
        f"<details><summary><code>{escape(gate.id)}</code> — {escape(gate.title)}</summary>"
        f"<p>{escape(gate.statement)}</p><p><b>Why:</b> {escape(gate.detail)}</p>"
        f"<p><b>Facets:</b></p><ul>{facets}</ul>"
        + (f"<p><b>Checks:</b></p><ul>{checks}</ul>" if checks else "")
        + f"<p><b>Reproduce:</b> <code>{escape(gate.reproduce)}</code></p>"
        "</details></td></tr>"
    )


def _rules(report: GateReport) -> str:
    if not report.rules:
        return ""
    rows = "".join(
        f"<tr><td>{_badge(r.status)}</td><td><code>{escape(r.id)}</code></td>"
        f"<td>{escape(r.statement)}</td><td>{len(r.checks)}</td><td>{escape(r.detail)}</td></tr>"
        for r in report.rules
    )
    return (
        "<h2>Spec rules beyond the gates</h2><p class='meta'>Checked like gates; not part of "
        "the ceiling.</p><table><tr><th>Status</th><th>Rule</th><th>Statement</th>"
        f"<th>Checks</th><th>Why</th></tr>{rows}</table>"
    )


def render_html(report: GateReport) -> str:
    run, ceiling = report.run, report.ceiling
    held = (
        f"<small>Held by M{ceiling.held_by}: {escape(ceiling.reason)}.</small>"
        if ceiling.held_by
        else f"<small>{escape(ceiling.reason)}.</small>"
    )
    milestone_rows = "".join(
        f"<tr><td>M{m.number}</td><td>{escape(m.source)}</td>"
        f"<td class='{m.state.value}'>{escape(m.state.value.replace('_', ' '))}</td>"
        f"<td>{f'{m.gates_passing}/{m.gates_total}' if m.source == 'suite' else '—'}</td>"
        f"<td>{escape(m.note)}</td></tr>"
        for m in report.milestones
    )
    summary = " ".join(f"{_badge(GateStatus(k))} {v}" for k, v in report.summary.items())
    gate_rows = "".join(_gate_row(g) for g in report.gates)
    pg = run.postgres
    meta = (
        f"commit {escape(run.commit or 'unknown')}{' (dirty)' if run.commit_dirty else ''} · "
        f"profile {escape(run.profile)} · seed {run.seed} · PostgreSQL "
        f"{escape(pg.version or 'unavailable')} ({escape(pg.source or pg.error or 'none')}) · "
        f"tzdata {escape(run.tzdata or 'unknown')} · Python {escape(run.python)} · "
        f"started {run.started_at.isoformat()} · {run.duration_s:.1f} s · "
        f"ledger: {escape(run.ledger)}"
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>Gate report — ceiling {escape(ceiling.label)}</title><style>{_CSS}</style>"
        "</head><body>"
        f"<h1>Scheduling gate report</h1><p class='meta'>{meta}</p>"
        f"<div class='ceiling'>Verified gate ceiling: <b>{escape(ceiling.label)}</b>{held}</div>"
        f"<p>{summary}</p>"
        "<h2>Milestones</h2><table><tr><th>Milestone</th><th>Verified by</th><th>State</th>"
        f"<th>Gates passing</th><th>Note</th></tr>{milestone_rows}</table>"
        "<h2>Gates</h2><table><tr><th>Status</th><th>M</th><th>Kind</th><th>Gate</th></tr>"
        f"{gate_rows}</table>"
        f"{_rules(report)}"
        f"<p class='meta'>Command: <code>{escape(run.command)}</code></p>"
        "</body></html>\n"
    )
