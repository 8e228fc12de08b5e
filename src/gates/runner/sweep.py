"""``scheduling-gates sweep``: the same gate checks under many seeds, and any verdict
that moves with the seed.

CI runs the gates with a fresh random seed, so a gate whose status depends on the
seed (a coverage guard met only by a lucky draw, say) turns a correct commit red at
random. The sweep runs the selected gates (default: the whole quick profile) once per
seed, each run a normal ``run_gates`` with its own report under ``OUTPUT/seed-N/``,
and exits 1 if any gate's status differs between seeds. It prints a table seed x
differing gates, and for each odd seed (one whose status differs from the most common
one) the command that replays it. ``sweep.json`` keeps every seed's statuses.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gates.runner import Profile, RunOptions, command_line, run_gates
from gates.runner.inventory import default_checks_dir

# Seeds known to have split verdicts before issue 10: always part of a default sweep.
KNOWN_SEEDS = (1, 20261130, 455213441, 7, 3593472009)

Statuses = dict[str, str]


@dataclass
class SweepOutcome:
    """Every seed's gate statuses, and what differs between them."""

    statuses: dict[int, Statuses] = field(default_factory=dict)
    durations: dict[int, float] = field(default_factory=dict)

    def differing(self) -> list[str]:
        """Gates whose status is not the same for every seed (a gate absent from a
        seed's report counts as status ``ABSENT``)."""
        gates = sorted({g for s in self.statuses.values() for g in s})
        return [g for g in gates if len({s.get(g, "ABSENT") for s in self.statuses.values()}) > 1]

    def usual(self, gate: str) -> str:
        """The most common status of ``gate`` (ties: the alphabetically first)."""
        counts = Counter(s.get(gate, "ABSENT") for s in self.statuses.values())
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

    def odd_seeds(self) -> dict[int, list[str]]:
        """Seed -> the differing gates whose status there is not the usual one."""
        out: dict[int, list[str]] = {}
        for gate in self.differing():
            usual = self.usual(gate)
            for seed, statuses in self.statuses.items():
                if statuses.get(gate, "ABSENT") != usual:
                    out.setdefault(seed, []).append(gate)
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": list(self.statuses),
            "identical": not self.differing(),
            "differing_gates": self.differing(),
            "odd_seeds": {str(k): v for k, v in self.odd_seeds().items()},
            "statuses": {str(k): v for k, v in self.statuses.items()},
            "durations_s": {str(k): v for k, v in self.durations.items()},
        }


def choose_seeds(count: int, listed: Sequence[int], rng: random.Random) -> list[int]:
    """``listed`` (in order, duplicates dropped), then fresh random seeds up to ``count``."""
    seeds = list(dict.fromkeys(listed))
    while len(seeds) < count:
        seed = rng.randrange(2**32)
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def replay_command(seed: int, gates: Sequence[str], profile: str) -> str:
    argv = ["run", *(a for g in gates for a in ("--gate", g)), "--seed", str(seed)]
    if profile != "quick":
        argv += ["--profile", profile]
    return command_line(argv)


def table(outcome: SweepOutcome) -> str:
    """Seed x differing gates (every seed a row); a line saying so when nothing differs."""
    differing = outcome.differing()
    lines = []
    if not differing:
        statuses = next(iter(outcome.statuses.values()), {})
        summary = Counter(statuses.values())
        lines.append(
            f"identical statuses for all {len(outcome.statuses)} seeds "
            f"({len(statuses)} gates: "
            + ", ".join(f"{k} {v}" for k, v in sorted(summary.items()))
            + ")"
        )
        lines.append("seeds: " + " ".join(str(s) for s in outcome.statuses))
        return "\n".join(lines)
    short = [g.removeprefix("gate.schedule.") for g in differing]
    widths = [max(len(s), 7) for s in short]
    lines.append("seed        " + "  ".join(s.ljust(w) for s, w in zip(short, widths, strict=True)))
    for seed, statuses in outcome.statuses.items():
        cells = [statuses.get(g, "ABSENT") for g in differing]
        marks = [
            c if c == outcome.usual(g) else f"{c}*" for c, g in zip(cells, differing, strict=True)
        ]
        lines.append(
            f"{seed:<11} " + "  ".join(m.ljust(w) for m, w in zip(marks, widths, strict=True))
        )
    lines.append("(* differs from the gate's most common status)")
    return "\n".join(lines)


Runner = Callable[[RunOptions], tuple[Any, int]]


def sweep(
    seeds: Sequence[int],
    template: RunOptions,
    runner: Runner = run_gates,
    progress: Callable[[str], None] = print,
) -> SweepOutcome:
    """One ``runner`` call per seed (``template`` with that seed and its own output)."""
    outcome = SweepOutcome()
    for n, seed in enumerate(seeds, 1):
        started = time.perf_counter()
        options = RunOptions(
            **{
                **vars(template),
                "seed": seed,
                "output": template.output / f"seed-{seed}",
                "command": command_line(["run", "--seed", str(seed)]),
            }
        )
        report, _ = runner(options)
        outcome.statuses[seed] = {g.id: g.status.value for g in report.gates if g.selected}
        outcome.durations[seed] = round(time.perf_counter() - started, 1)
        counts = Counter(outcome.statuses[seed].values())
        progress(
            f"[{n}/{len(seeds)}] seed {seed}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            + f" ({outcome.durations[seed]} s)"
        )
    return outcome


def add_parser(sub: Any, milestone: Callable[[str], int]) -> argparse.ArgumentParser:
    """Register ``sweep`` on the ``scheduling-gates`` subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "sweep", help="run the gates under many seeds; fail if any gate's status differs"
    )
    p.add_argument("--seeds", type=int, default=20, metavar="N", help="how many seeds (20)")
    p.add_argument(
        "--seed-list",
        default=",".join(str(s) for s in KNOWN_SEEDS),
        metavar="S,S,...",
        help="seeds to run first (default: the seeds known to have split verdicts)",
    )
    p.add_argument("--gate", action="append", default=[], metavar="ID", help="repeatable")
    p.add_argument(
        "--milestone", action="append", default=[], type=milestone, metavar="M", help="repeatable"
    )
    p.add_argument("-n", dest="workers", metavar="N", help="pytest-xdist workers (or auto)")
    p.add_argument("--profile", choices=["quick", "deep"], default="quick")
    p.add_argument("--output", type=Path, default=Path("reports/sweep"), metavar="DIR")
    p.add_argument("--checks-dir", type=Path, default=None, help=argparse.SUPPRESS)
    return p


def _seed_list(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(
            f"scheduling-gates sweep: --seed-list must be integers: {text!r}"
        ) from None


def cmd_sweep(args: argparse.Namespace, runner: Runner = run_gates) -> int:
    """Run the sweep ``args`` describe; 0 iff every gate's status is the same for all seeds."""
    listed = _seed_list(args.seed_list)
    seeds = choose_seeds(max(args.seeds, len(listed)), listed, random.SystemRandom())
    profile: Profile = args.profile
    template = RunOptions(
        checks_dir=(args.checks_dir or default_checks_dir()).resolve(),
        output=args.output,
        gates=args.gate,
        milestones=args.milestone,
        workers=args.workers,
        profile=profile,
    )
    print(f"sweep of {len(seeds)} seeds: {' '.join(map(str, seeds))}", flush=True)
    outcome = sweep(seeds, template, runner, lambda line: print(line, flush=True))
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "sweep.json").write_text(
        json.dumps(outcome.to_json(), indent=2), encoding="utf-8"
    )
    print()
    print(table(outcome))
    odd = outcome.odd_seeds()
    for seed, gates in odd.items():
        print(f"replay seed {seed}: {replay_command(seed, gates, profile)}")
    print(f"sweep written to {args.output / 'sweep.json'}")
    return 1 if odd else 0
