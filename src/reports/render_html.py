"""The HTML rendering: one self-contained page (no scripts, no external assets).

The first screen answers a release reviewer: the ceiling and what holds it, the run's
bar, the milestones (ranges), then what does not pass with why and what to do; the
passing gates and the run's details follow. Raw evidence sits behind ``<details>``.
"""

from __future__ import annotations

import json
from html import escape

from reports.first_screen import (
    Item,
    Section,
    bar_line,
    check_lines,
    milestone_lines,
    sections_of,
)
from reports.model import GateReport, GateStatus, MilestoneState
from reports.sensitivity_text import sensitivity_line

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:1rem auto;
max-width:78rem;color:#1b1f24;padding:0 1rem}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:1rem 0 .3rem}
.meta{color:#57606a;font-size:12px;margin:.1rem 0 .5rem}
.top{display:flex;gap:.8rem;flex-wrap:wrap;align-items:stretch;margin:.4rem 0}
.box{padding:.5rem .9rem;border-radius:8px;background:#f6f8fa;border-left:6px solid #0969da}
.ceiling{font-size:22px}.ceiling small,.box small{display:block;font-size:13px;color:#57606a}
.met{border-left-color:#1a7f37}.notmet{border-left-color:#cf222e;background:#ffebe9}
.unset{border-left-color:#8c959f}
ul.ms{list-style:none;padding:0;margin:.2rem 0;display:flex;flex-wrap:wrap;gap:.3rem}
ul.ms li{padding:.1rem .5rem;border-radius:10px;font-size:12px;border:1px solid #d0d7de}
.complete{background:#dafbe1}.incomplete{background:#ffebe9}.in_progress{background:#fff8c5}
.not_started,.unknown{background:#eaeef2}
table{border-collapse:collapse;width:100%;margin:.2rem 0 1rem}
th,td{border-bottom:1px solid #d0d7de;padding:.2rem .4rem;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-size:12px}code{font-size:12px}td.todo{font-size:12px}
.s{font-weight:600;padding:0 .4rem;border-radius:4px;font-size:11px;white-space:nowrap}
.PASS{background:#dafbe1;color:#116329}.FAIL{background:#ffebe9;color:#a40e26}
.ERROR{background:#fff1e5;color:#953800}.MISSING{background:#eaeef2;color:#424a53}
.NOT_RUN{background:#ddf4ff;color:#0550ae}
details{margin:.1rem 0}summary{cursor:pointer}
pre{background:#f6f8fa;padding:.4rem;overflow:auto;font-size:11px;max-height:20rem;margin:.2rem 0}
ul.ev{margin:.1rem 0;padding-left:1.1rem;font-size:12px}
"""


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _badge(status: GateStatus) -> str:
    return f'<span class="s {status.value}">{status.value}</span>'


def _code(text: str) -> str:
    """Backtick spans (as written for Markdown) become <code>."""
    parts = escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _checks(item: Item) -> str:
    rows = []
    for check, summary in check_lines(item.result.checks):
        raw = json.dumps(check.evidence, indent=2, sort_keys=True)
        rows.append(
            f"<li><code>{escape(check.nodeid)}</code> {escape(check.outcome.value)}"
            f" ({check.duration_s:.2f} s): {_code(summary)}"
            + (f"<pre>{escape(check.detail)}</pre>" if check.detail else "")
            + (
                f"<details><summary>raw evidence</summary><pre>{escape(raw)}</pre></details>"
                if check.evidence
                else ""
            )
            + "</li>"
        )
    return f"<ul class='ev'>{''.join(rows)}</ul>" if rows else ""


def _more(item: Item) -> str:
    facets = ", ".join(
        f"{escape(f.name)} {f.status.value} ({len(f.checks)})" for f in item.result.facets
    )
    return (
        f"<details><summary>statement, facets, checks</summary>"
        f"<p>{escape(item.statement)}</p><p>Facets: {facets}</p>{_checks(item)}"
        f"<p>Reproduce: <code>{escape(item.result.reproduce)}</code></p></details>"
    )


def _not_passing(section: Section, total: int) -> str:
    head = (
        f"<h2 id='{section.noun}-not-passing'>{section.title} not passing "
        f"({len(section.not_passing)} of {total})</h2>"
    )
    if not section.not_passing:
        return head + f"<p>Every {section.noun} passes.</p>"
    rows = "".join(
        f"<tr class='np' id='{escape(i.id)}'><td>{_badge(i.status)}</td><td>M{i.milestone}</td>"
        f"<td><code>{escape(i.id)}</code><br>{escape(i.title)}</td>"
        f"<td>{escape(i.why)}</td><td class='todo'>{_code(i.todo)}{_more(i)}</td></tr>"
        for i in section.not_passing
    )
    return (
        head + "<table><tr><th>Status</th><th>M</th><th style='width:30%'>Gate</th>"
        "<th style='width:14%'>Why</th>"
        f"<th>What to do</th></tr>{rows}</table>"
    )


def _passing(section: Section) -> str:
    if not section.passing:
        return ""
    rows = "".join(
        f"<tr id='{escape(i.id)}'><td>{_badge(i.status)}</td><td>M{i.milestone}</td>"
        f"<td><code>{escape(i.id)}</code><br>{escape(i.title)}</td>"
        f"<td>{_n(len(i.result.checks), 'check')}{_checks(i)}</td></tr>"
        for i in section.passing
    )
    return (
        f"<h2 id='{section.noun}-passing'>{section.title} passing ({len(section.passing)})</h2>"
        "<table>"
        f"<tr><th>Status</th><th>M</th><th>Gate</th><th>Checks and evidence</th></tr>{rows}</table>"
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
    run, ceiling, bar = report.run, report.ceiling, report.requirements
    held = f"held by M{ceiling.held_by}: {ceiling.reason}" if ceiling.held_by else ceiling.reason
    bar_says = bar_line(bar, ceiling, report.milestones)
    bar_class = "unset" if not bar.is_set else ("met" if bar.met else "notmet")
    milestones = "".join(
        f"<li class='{m.state.value}'>{escape(m.text)}</li>"
        for m in milestone_lines(report.milestones)
    )
    summary = " ".join(f"{_badge(GateStatus(k))} {v}" for k, v in report.summary.items())
    sections = sections_of(report)
    body = "".join(
        _not_passing(s, len(s.not_passing) + len(s.passing)) for s in sections
    ) + "".join(_passing(s) for s in sections)
    pg = run.postgres
    meta = (
        f"commit {escape(run.commit or 'unknown')}{' (dirty)' if run.commit_dirty else ''} · "
        f"profile {escape(run.profile)} · seed {run.seed} · PostgreSQL "
        f"{escape(pg.version or 'unavailable')} ({escape(pg.source or pg.error or 'none')}) · "
        f"tzdata {escape(run.tzdata or 'unknown')} · Python {escape(run.python)} · "
        f"started {run.started_at.isoformat()} · {run.duration_s:.1f} s<br>"
        f"{escape(sensitivity_line(run.sensitivity))}"
    )
    complete_suite = [
        m for m in report.milestones if m.source == "suite" and m.state == MilestoneState.COMPLETE
    ]
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>Gate report: ceiling {escape(ceiling.label)}</title><style>{_CSS}</style>"
        "</head><body>"
        f"<h1>Scheduling gate report</h1><p class='meta'>{meta}</p>"
        "<div class='top'>"
        "<div class='box ceiling' id='ceiling'>"
        f"Verified gate ceiling: <b>{escape(ceiling.label)}</b>"
        f"<small>{escape(held)}</small></div>"
        f"<div class='box {bar_class}' id='bar'><b>{escape(bar_says)}</b>"
        f"<small>{len(complete_suite)} suite milestone(s) complete · {summary}</small></div>"
        "</div>"
        f"<ul class='ms' id='milestones'>{milestones}</ul>"
        f"{body}"
        f"{_rules(report)}"
        f"<h2>Run</h2><p class='meta'>Command: <code>{escape(run.command)}</code> · "
        f"milestones: {escape(run.ledger)} · platform {escape(run.platform)} · "
        f"tool {escape(run.tool_version or 'unknown')} · schema {escape(report.schema_version)}</p>"
        "</body></html>\n"
    )
