"""scheduling-sim: list scenarios, run them, replay a trace, shrink a failure.

The database comes from the project's provider (simulation.provider), which honours
SCHEDULING_DATABASE_URL or starts a throwaway local server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from scheduling.console import add_version, guarded, progress
from simulation.engine.errors import Divergence, FaultKind, SimulationError
from simulation.engine.evidence import failure_report
from simulation.engine.faults import CLIENT_FAULT_KINDS
from simulation.engine.scenario import Scenario
from simulation.engine.shrink import shrink
from simulation.engine.simulator import MODES, Execution, Simulator, replay_command
from simulation.engine.store import FailureStore
from simulation.engine.targets import DatabaseTarget, SharedDatabase, fresh_databases
from simulation.engine.trace import differences, read_trace, trace_text, write_trace
from simulation.provider import acquire_server
from simulation.scenarios import all_scenarios, get_scenario

# Stable codes of this CLI's refusals (exit 2, one line, never a traceback).
TRACE_UNREADABLE = "sim.trace_unreadable"
TRACE_INVALID = "sim.trace_invalid"
INVALID_ARGUMENT = "sim.invalid_argument"


class UsageError(SimulationError):
    """Bad input from the command line: the code and the bad value, in one line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")


@contextlib.asynccontextmanager
async def database_for(scenario: Scenario) -> AsyncIterator[DatabaseTarget]:
    """A provider server; a fresh template clone per execution if the scenario asks."""
    server = await asyncio.to_thread(acquire_server)
    try:
        if scenario.template is not None:
            template = await asyncio.to_thread(scenario.template, server)
            yield fresh_databases(server, template)
            return
        url = await asyncio.to_thread(server.create_database)
        try:
            yield SharedDatabase(url)
        finally:
            await asyncio.to_thread(server.drop_database, url)
    finally:
        await asyncio.to_thread(server.close)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scheduling-sim", description=__doc__)
    add_version(parser, "scheduling-sim")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = sub.add_parser("list", help="one scenario a line, its name first")
    listing.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    run = sub.add_parser("run", help="run a scenario")
    run.add_argument("--scenario", required=True, help="a scenario name (see `list`)")
    run.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    run.add_argument(
        "--mode",
        choices=MODES,
        default="random",
        help="random seeds, every interleaving (exhaustive), or a crash after every step",
    )
    run.add_argument("--trace", type=Path, help="write the (first failing) trace here")
    run.add_argument("--executions", type=int, default=None, help="random: seeds; exhaustive: cap")
    run.add_argument("--fault-rate", type=float, default=0.0, help="random mode fault rate")
    run.add_argument(
        "--kinds",
        default=",".join(k.value for k in CLIENT_FAULT_KINDS),
        help="comma-separated fault kinds to inject (default: every client-side kind)",
    )
    run.add_argument("--store", type=Path, default=None, help="failing-trace folder")
    run.add_argument("--no-store", action="store_true", help="neither replay nor save failures")
    run.add_argument("--json", action="store_true", help="print the exploration's evidence as JSON")
    replay = sub.add_parser(
        "replay",
        help="re-execute a trace twice and check it is deterministic",
        description=(
            "Re-execute a trace twice and compare each result with the trace byte for byte. "
            "This checks determinism, not correctness: a failing trace replays 'identical' "
            "and exits 0 unless --expect-pass is given."
        ),
    )
    replay.add_argument("trace", type=Path, help="a trace file written by `run --trace`")
    replay.add_argument("--strict", action="store_true", help="a different commit also fails")
    replay.add_argument(
        "--expect-pass",
        action="store_true",
        help="also fail (exit 1) when the replayed outcome violates an invariant",
    )
    shrink_p = sub.add_parser("shrink", help="the shortest step order that still fails")
    shrink_p.add_argument("trace", type=Path, help="a failing trace file")
    shrink_p.add_argument(
        "--output", type=Path, default=None, help="where the shrunk trace goes (default: beside it)"
    )
    return parser


def load_trace(path: Path) -> dict[str, Any]:
    """A trace file, or a UsageError naming the file and what is wrong with it."""
    try:
        trace = read_trace(path)
    except OSError as exc:
        raise UsageError(
            TRACE_UNREADABLE, f"cannot read trace {str(path)!r}: {exc.strerror}"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(TRACE_INVALID, f"{str(path)!r} is not a trace: {exc}") from None
    key = trace.get("key")
    if not isinstance(key, dict) or not isinstance(key.get("scenario"), str):
        raise UsageError(TRACE_INVALID, f"{str(path)!r} is not a trace: no key.scenario")
    return trace


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            scenarios = all_scenarios()
            if args.json:
                rows = [{"name": n, "summary": s.summary} for n, s in scenarios.items()]
                print(json.dumps(rows, indent=2))
                return 0
            for name, scenario in scenarios.items():
                print(f"{name}\t{scenario.summary}")
            return 0
        if args.command == "run":
            return asyncio.run(_run(args))
        if args.command == "replay":
            trace = load_trace(args.trace)
            return asyncio.run(_replay(trace, strict=args.strict, expect_pass=args.expect_pass))
        return asyncio.run(_shrink(load_trace(args.trace), args.trace, args.output))
    except SimulationError as exc:
        print(f"scheduling-sim: error: {exc}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace) -> int:
    scenario = get_scenario(args.scenario)
    known = {k.value for k in CLIENT_FAULT_KINDS}
    bad = [k for k in args.kinds.split(",") if k and k not in known]
    if bad:
        raise UsageError(
            INVALID_ARGUMENT, f"--kinds: unknown fault kind(s) {bad}; known: {sorted(known)}"
        )
    kinds = tuple(FaultKind(k) for k in args.kinds.split(",") if k)
    store = None if args.no_store else FailureStore(args.store)
    default = {"random": 1, "exhaustive": 10_000, "crash": 0}[args.mode]
    executions = args.executions if args.executions is not None else default
    async with database_for(scenario) as target:
        progress(f"{scenario.name} mode={args.mode} seed={args.seed}: exploring ...")
        simulator = Simulator(
            target,
            store=store,
            on_execution=lambda e: progress(f"  execution {e.index}: {e.status}"),
        )
        result = await simulator.explore(
            scenario,
            mode=args.mode,
            seed=args.seed,
            executions=executions,
            fault_rate=args.fault_rate,
            kinds=kinds,
        )
    ev = result.evidence()
    if args.json:
        print(json.dumps(ev, indent=2, sort_keys=True, default=str))
        return 1 if result.failures else (3 if result.not_covered() else 0)
    statuses = ", ".join(f"{k} {v}" for k, v in ev["statuses"].items()) or "none"
    print(
        f"{scenario.name} mode={args.mode} seed={args.seed}: {result.executions} executions, "
        f"{result.interleavings_explored} interleavings checked ({statuses})"
        + (", exhausted" if result.exhausted else "")
    )
    reached = ", ".join(f"{k} x{v}" for k, v in ev["steps_reached"].items()) or "none"
    fired = ", ".join(f"{k} x{v}" for k, v in ev["faults_fired"].items()) or "none"
    print(f"steps reached: {reached}")
    print(f"faults fired: {fired}")
    for item in result.replayed_first:
        print(f"replayed first: {item['trace']}: {item['result']}")
    if args.trace is not None:
        chosen: Execution | None = result.failures[0] if result.failures else None
        if chosen is None:
            chosen = result.last_complete or result.last
        if chosen is not None:
            write_trace(chosen.trace, args.trace)
            print(f"trace written to {args.trace}")
            if chosen.failed:
                chosen.saved_to = args.trace
    if result.not_covered():
        print("not covered: " + "; ".join(result.not_covered()))
    if result.failures:
        print("FAILED")
        print(failure_report(result))
        first = result.failures[0].saved_to
        if first is not None:
            print(f"replay with: {replay_command(first)}")
        return 1
    return 3 if result.not_covered() else 0


async def _replay(trace: dict[str, Any], *, strict: bool, expect_pass: bool) -> int:
    original = trace_text(trace)
    scenario = get_scenario(str(trace["key"]["scenario"]))
    async with database_for(scenario) as target:
        simulator = Simulator(target)
        texts = []
        for attempt in (1, 2):
            try:
                execution = await simulator.replay(scenario, trace)
            except Divergence as exc:
                print(f"replay {attempt}: DIVERGED: {exc}")
                return 1
            texts.append(execution)
    verdict = 0
    for attempt, execution in enumerate(texts, start=1):
        diff = differences(trace, execution.trace)
        if not diff:
            print(f"replay {attempt}: identical, byte for byte ({len(original)} bytes)")
        elif diff == ["key.commit"] and not strict:
            print(
                f"replay {attempt}: identical except key.commit "
                f"({trace['key']['commit']} -> {execution.key.commit})"
            )
        else:
            print(f"replay {attempt}: DIFFERS at {', '.join(diff)}")
            verdict = 1
    outcome = texts[0]
    print(f"outcome: {outcome.status}" + "".join(f"; {v.message}" for v in outcome.violations))
    print(
        "checked: determinism (both replays reproduce the trace)"
        if verdict == 0
        else "checked: determinism: NOT deterministic"
    )
    if expect_pass:
        print("checked: --expect-pass: " + ("FAILED" if outcome.failed else "passed"))
        if outcome.failed:
            return 1
    elif outcome.failed:
        print("note: the outcome violates an invariant; add --expect-pass to fail on that")
    return verdict


async def _shrink(trace: dict[str, Any], path: Path, output: Path | None) -> int:
    scenario = get_scenario(str(trace["key"]["scenario"]))
    async with database_for(scenario) as target:
        result = await shrink(Simulator(target), scenario, trace)
    out = output or path.with_name(path.stem + ".shrunk.json")
    write_trace(result.execution.trace, out)
    print(
        f"shrunk a {result.original_length}-decision order to a {len(result.guide)}-entry guide "
        f"in {result.attempts} executions: {' '.join(result.guide) or '(none)'}"
    )
    print("order: " + " ".join(result.execution.step_order()))
    print("violations: " + "; ".join(v.message for v in result.execution.violations))
    print(f"replay with: {replay_command(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
