"""Benchmark: how long each ``scheduling`` command takes before its database time.

    python bench/bench_cli.py --output bench/results/cli.json

Every figure is the wall time of a fresh process, as a user's shell sees it, taken as
the minimum over ``--rounds`` interleaved rounds (the minimum is the least disturbed
run on a shared machine; the median is reported beside it):

* ``scheduling --version`` and ``scheduling --help`` (issue 26 item 4: under 0.3 s);
* ``scheduling NAME --help`` for every subcommand (asking a command for help);
* each one-shot command that connects, run for real against a server that refuses at
  once (nothing listens on ``127.0.0.1:1``): everything the command does before its
  database answers, and a refused connection costs about a millisecond, so the figure
  is the command's time minus its database time (issue 26: under 0.5 s plus its
  database time). A run that stops before reaching the database (a usage error, a bad
  input file) is refused by the bench instead of timed. The long-running roles
  (``serve``, ``scheduler``, ``run-worker``, ``mcp``, ``dev``) are not run here;
* the package's bytecode is compiled first (``compile_bytecode``), as ``pip install``
  leaves an installed copy: an editable checkout run with ``PYTHONDONTWRITEBYTECODE=1``
  (this project's sandboxes set it) would otherwise compile every module of ours from
  source at every start, some 70 ms no installed copy pays. ADR 2750 gives both figures;
* two anchors in the same rounds: the bare interpreter (``python -c pass``) and the
  database stack no connecting command can avoid (SQLAlchemy's asyncio engine, its
  PostgreSQL dialect over asyncpg, asyncpg), so a figure reads as a ratio on any machine.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import scheduling
from scheduling.cli.registry import SUBCOMMANDS

TOP_LEVEL_BOUND_MS = 300
SUBCOMMAND_BOUND_MS = 500

ANCHORS: dict[str, list[str]] = {
    "interpreter": [sys.executable, "-c", "pass"],
    "database stack": [
        sys.executable,
        "-c",
        "import sqlalchemy.ext.asyncio, sqlalchemy.dialects.postgresql.asyncpg, asyncpg",
    ],
}


def console_script() -> list[str]:
    """The installed ``scheduling`` script beside this interpreter, else the module."""
    script = Path(sys.executable).parent / "scheduling"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "scheduling.cli"]


REFUSING_URL = "postgresql://bench@127.0.0.1:1/bench"
"""A server that refuses at once: what a run measured to its database meets."""

REACHED_THE_DATABASE = "schedule.database.unavailable"
"""What every measured run must print: proof that it got as far as connecting."""

BATCH = """[[tenants.acme.principals]]
principal_id = "alice"
scopes = ["schedule.read"]
"""


def commands() -> dict[str, list[str]]:
    """What is asked for help: every command, and the top level."""
    scheduling = console_script()
    out = {"--version": [*scheduling, "--version"], "--help": [*scheduling, "--help"]}
    for name in SUBCOMMANDS:
        out[f"{name} --help"] = [*scheduling, name, "--help"]
    return out


def runs(workdir: Path) -> dict[str, list[str]]:
    """The one-shot commands that connect, each with what it needs to reach the
    database (input files written in ``workdir``)."""
    scheduling = console_script()
    (workdir / "principals.json").write_text('{"principals": []}')
    (workdir / "agents.json").write_text('{"agents": []}')
    (workdir / "batch.toml").write_text(BATCH)
    schedule = "00000000-0000-0000-0000-000000000001"
    every = {
        "migrate": ["migrate", "--url", REFUSING_URL],
        "tokens add": ["tokens", "add", "--tenant", "acme", "--principal", "alice"],
        "principals import": ["principals", "import", str(workdir / "principals.json")],
        "agents import": ["agents", "import", str(workdir / "agents.json")],
        "provision apply": ["provision", "apply", str(workdir / "batch.toml")],
        "purge": ["purge", "--tenant", "acme"],
        "repair-next-fire": ["repair-next-fire", schedule],
    }
    return {f"{name} (run)": [*scheduling, *argv] for name, argv in every.items()}


def run_environment(workdir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENT_SCHEDULE_DATABASE_URL": REFUSING_URL,
        "AGENT_SCHEDULE_API_TOKENS_FILE": str(workdir / "tokens.json"),
    }


def wall_ms(argv: list[str], env: dict[str, str] | None = None) -> float:
    """One fresh process; a help must exit 0, a run must have reached the database."""
    started = time.perf_counter()
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, timeout=120, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    elapsed = (time.perf_counter() - started) * 1000
    ok = done.returncode == 0 if env is None else REACHED_THE_DATABASE in done.stderr
    if not ok:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr[-400:]!r}")
    return elapsed


def compile_bytecode() -> Path:
    """Write the package's bytecode beside its sources (``__pycache__``, ignored by git),
    as installing a wheel does; the interpreter still checks each file's source stamp,
    so an edited module is recompiled as usual. Returns the package's directory."""
    package = Path(scheduling.__file__).parent
    if not compileall.compile_dir(package, quiet=1):
        raise RuntimeError(f"{package}: a module did not compile")
    return package


def bound_of(name: str) -> int:
    return TOP_LEVEL_BOUND_MS if name in ("--version", "--help") else SUBCOMMAND_BOUND_MS


def measure(rounds: int) -> dict[str, list[float]]:
    """Each help, run and anchor once per round, the order reversed every other round."""
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as temporary:
        workdir = Path(temporary)
        connecting = runs(workdir)
        every = {**{f"anchor: {k}": v for k, v in ANCHORS.items()}, **commands(), **connecting}
        env = run_environment(workdir)
        samples: dict[str, list[float]] = {name: [] for name in every}
        order = list(every)
        for r in range(rounds):
            for name in order if r % 2 == 0 else reversed(order):
                samples[name].append(wall_ms(every[name], env if name in connecting else None))
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
    package = compile_bytecode()
    samples = measure(args.rounds)
    report = {
        "benchmark": "cli_startup",
        "bytecode": f"compiled before timing ({package}), as an installed copy has it",
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
