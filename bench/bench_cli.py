"""Benchmark: how long each ``scheduling`` command takes before its database time.

    python bench/bench_cli.py --output bench/results/cli.json

Every figure is the wall time of a fresh process, as a user's shell sees it, taken as
the minimum over ``--rounds`` interleaved rounds (the minimum is the least disturbed
run on a shared machine; the median is reported beside it):

* ``scheduling --version`` and ``scheduling --help`` (issue 26 item 4: under 0.3 s);
* ``scheduling NAME --help`` for every subcommand: the subcommand's module imported and
  its parser built, which is what its run imports before it opens an engine (issue 26:
  every command under 0.5 s plus its database time). A run adds its engine's dialect,
  the connection and the database's own time, which this does not measure;
* two anchors in the same rounds: the bare interpreter (``python -c pass``) and the
  database stack no connecting command can avoid (``import sqlalchemy.ext.asyncio,
  asyncpg``), so a figure reads as a ratio on any machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scheduling.cli.registry import SUBCOMMANDS

TOP_LEVEL_BOUND_MS = 300
SUBCOMMAND_BOUND_MS = 500

ANCHORS: dict[str, list[str]] = {
    "interpreter": [sys.executable, "-c", "pass"],
    "database stack": [sys.executable, "-c", "import sqlalchemy.ext.asyncio, asyncpg"],
}


def console_script() -> list[str]:
    """The installed ``scheduling`` script beside this interpreter, else the module."""
    script = Path(sys.executable).parent / "scheduling"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "scheduling.cli"]


def commands() -> dict[str, list[str]]:
    scheduling = console_script()
    out = {"--version": [*scheduling, "--version"], "--help": [*scheduling, "--help"]}
    for name in SUBCOMMANDS:
        out[f"{name} --help"] = [*scheduling, name, "--help"]
    return out


def wall_ms(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, timeout=120)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr[-400:]!r}")
    return elapsed


def bound_of(name: str) -> int:
    return TOP_LEVEL_BOUND_MS if name in ("--version", "--help") else SUBCOMMAND_BOUND_MS


def measure(rounds: int) -> dict[str, list[float]]:
    """Each command and anchor once per round, the order reversed every other round."""
    every = {**{f"anchor: {k}": v for k, v in ANCHORS.items()}, **commands()}
    samples: dict[str, list[float]] = {name: [] for name in every}
    order = list(every)
    for r in range(rounds):
        for name in order if r % 2 == 0 else reversed(order):
            samples[name].append(wall_ms(every[name]))
    return samples


def summarize(samples: dict[str, list[float]]) -> dict[str, Any]:
    stack = min(samples["anchor: database stack"])
    rows: dict[str, Any] = {}
    for name, values in samples.items():
        best = min(values)
        row: dict[str, Any] = {
            "min_ms": round(best, 1),
            "median_ms": round(statistics.median(values), 1),
            "ratio_to_database_stack": round(best / stack, 3),
        }
        if not name.startswith("anchor: "):
            row["bound_ms"] = bound_of(name)
            row["met"] = best <= bound_of(name)
        rows[name] = row
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("bench/results/cli.json"))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    samples = measure(args.rounds)
    report = {
        "benchmark": "cli_startup",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "loadavg_end": list(os.getloadavg()),
        "commands": summarize(samples),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    for name, row in report["commands"].items():
        verdict = "" if "met" not in row else ("met" if row["met"] else "MISSED")
        print(
            f"{name:28s} {row['min_ms']:7.1f} ms (median {row['median_ms']:7.1f})"
            f"  x{row['ratio_to_database_stack']:.2f} of the database stack  {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
