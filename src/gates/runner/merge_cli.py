"""``scheduling-gates merge OUT PART.json...``: one gate report from a sharded run's parts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from catalog import load_catalog
from catalog.milestones import load_milestones
from catalog.provenance import milestones_digest
from gates.runner import exit_code
from reports.merge import MergeError, Part, merge_parts
from reports.verify import load_report
from reports.writer import write_reports

# Exit codes: 0 merged and the run met its bar; 1 merged, bar not met; 2 refused.
REFUSED = 2


def add_parser(sub: Any, milestone: Callable[[str], int]) -> None:
    merge = sub.add_parser(
        "merge",
        help="merge the partial reports of a sharded run (run --shard K/N) into one report",
        description=(
            "Merge the gate-report.json files of every shard of one run into OUT (the four "
            "report files). The result equals a single run with the same seed. Exit 0 when "
            "the merged run meets its bar, 1 when it does not, 2 when the parts are refused "
            "(different seeds, commits, catalogs, milestone files, check files, selections or "
            "bars; a shard given twice or missing)."
        ),
    )
    merge.add_argument("output", type=Path, metavar="OUT", help="directory for the report files")
    merge.add_argument("parts", type=Path, nargs="+", metavar="PART", help="partial reports")
    merge.add_argument(
        "--milestone-file",
        "--ledger",
        dest="milestone_file",
        type=Path,
        metavar="FILE",
        help="the milestone file the parts used (--ledger: its former name)",
    )


def cmd_merge(args: argparse.Namespace) -> int:
    parts = []
    for path in args.parts:
        report, problems = load_report(path)
        if report is None:
            first = problems[0].splitlines()[0]
            print(f"scheduling-gates merge: gates.merge.unreadable: {first}", file=sys.stderr)
            return REFUSED
        parts.append(Part(path, report))
    catalog = load_catalog()
    declared = load_milestones(args.milestone_file, catalog.milestones())
    try:
        merged = merge_parts(parts, catalog, declared, milestones_digest(args.milestone_file))
    except MergeError as exc:
        print(f"scheduling-gates merge: {exc}", file=sys.stderr)
        return REFUSED
    write_reports(merged, args.output)
    selected = {g.id for g in merged.gates if g.selected}
    bar = merged.requirements
    print(f"Verified gate ceiling: {merged.ceiling.label} (merged from {len(parts)} shards)")
    print("  ".join(f"{k} {v}" for k, v in merged.summary.items()))
    print(f"seed {merged.run.seed}; reports in {args.output}/")
    return exit_code(merged, selected, bar.ceiling, bar.complete)
