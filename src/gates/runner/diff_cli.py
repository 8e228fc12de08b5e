"""``scheduling-gates diff OLD.json NEW.json``: what changed; exit 1 on any regression."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from reports.diff import diff_reports, render_diff_json, render_diff_markdown, render_diff_text
from reports.verify import load_report

RENDER = {"markdown": render_diff_markdown, "text": render_diff_text, "json": render_diff_json}


def add_parser(sub: Any) -> None:
    diff = sub.add_parser(
        "diff",
        help="what changed between two reports; exit 1 on any regression",
        description=(
            "Compare two gate-report.json files: gates that changed status, checks added "
            "or removed, evidence that shrank, ceiling movement. Exit 0 when nothing got "
            "worse, 1 on any regression, 2 when a report cannot be read."
        ),
    )
    diff.add_argument("old", type=Path, help="the baseline report (e.g. the base branch's)")
    diff.add_argument("new", type=Path, help="the report to judge")
    diff.add_argument(
        "--format",
        choices=sorted(RENDER),
        default="text",
        help="markdown for a pull request comment, text for a terminal, json for scripts",
    )


def cmd_diff(args: argparse.Namespace) -> int:
    reports = []
    for path in (args.old, args.new):
        report, problems = load_report(path)
        if report is None:
            print(f"scheduling-gates diff: {problems[0].splitlines()[0]}", file=sys.stderr)
            return 2
        reports.append(report)
    diff = diff_reports(reports[0], reports[1])
    sys.stdout.write(RENDER[args.format](diff))
    return 1 if diff.regressions else 0
