"""Write the four renderings of one report into a directory."""

from __future__ import annotations

from pathlib import Path

from reports.model import GateReport
from reports.render_html import render_html
from reports.render_junit import render_junit
from reports.render_markdown import render_markdown

FILES = ("gate-report.json", "gate-report.md", "junit.xml", "gate-report.html")


def write_reports(report: GateReport, output: Path) -> list[Path]:
    output.mkdir(parents=True, exist_ok=True)
    contents = (
        report.model_dump_json(indent=2) + "\n",
        render_markdown(report),
        render_junit(report),
        render_html(report),
    )
    paths = []
    for name, text in zip(FILES, contents, strict=True):
        path = output / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def write_part(report: GateReport, output: Path) -> Path:
    """A shard's partial report: the JSON only (its statuses wait for ``merge``)."""
    output.mkdir(parents=True, exist_ok=True)
    path = output / FILES[0]
    path.write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path
