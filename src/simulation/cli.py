"""``scheduling-sim``: list scenarios, run them, replay a trace, shrink a failure.

The database comes from the project's provider (``simulation.provider``), which honours
``SCHEDULING_DATABASE_URL`` or starts a throwaway local server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from simulation.engine.errors import Divergence, FaultKind, SimulationError
from simulation.engine.evidence import failure_report
from simulation.engine.scenario import Scenario
from simulation.engine.shrink import shrink
from simulation.engine.simulator import MODES, Execution, Simulator, replay_command
from simulation.engine.store import FailureStore
from simulation.engine.targets import DatabaseTarget, SharedDatabase, fresh_databases
from simulation.engine.trace import differences, read_trace, trace_text, write_trace
from simulation.provider import acquire_server
from simulation.scenarios import all_scenarios, get_scenario


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
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one scenario a line, its name first")
    run = sub.add_parser("run", help="run a scenario")
    run.add_argument("--scenario", required=True)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--mode", choices=MODES, default="random")
    run.add_argument("--trace", type=Path, help="write the (first failing) trace here")
    run.add_argument("--executions", type=int, default=None, help="random: seeds; exhaustive: cap")
    run.add_argument("--fault-rate", type=float, default=0.0, help="random mode fault rate")
    run.add_argument("--kinds", default=",".join(k.value for k in FaultKind))
    run.add_argument("--store", type=Path, default=None, help="failing-trace folder")
    run.add_argument("--no-store", action="store_true", help="neither replay nor save failures")
    replay = sub.add_parser("replay", help="re-execute a trace twice; fail if it differs")
    replay.add_argument("trace", type=Path)
    replay.add_argument("--strict", action="store_true", help="a different commit also fails")
    shrink_p = sub.add_parser("shrink", help="the shortest step order that still fails")
    shrink_p.add_argument("trace", type=Path)
    shrink_p.add_argument("--output", type=Path, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            for name, scenario in all_scenarios().items():
                print(f"{name}\t{scenario.summary}")
            return 0
        if args.command == "run":
            return asyncio.run(_run(args))
        if args.command == "replay":
            return asyncio.run(_replay(args.trace, strict=args.strict))
        return asyncio.run(_shrink(args.trace, args.output))
    except SimulationError as exc:
        print(f"scheduling-sim: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


async def _run(args: argparse.Namespace) -> int:
    scenario = get_scenario(args.scenario)
    kinds = tuple(FaultKind(k) for k in args.kinds.split(",") if k)
    store = None if args.no_store else FailureStore(args.store)
    default = {"random": 1, "exhaustive": 10_000, "crash": 0}[args.mode]
    executions = args.executions if args.executions is not None else default
    async with database_for(scenario) as target:
        simulator = Simulator(target, store=store)
        result = await simulator.explore(
            scenario,
            mode=args.mode,
            seed=args.seed,
            executions=executions,
            fault_rate=args.fault_rate,
            kinds=kinds,
        )
    ev = result.evidence()
    print(
        f"{scenario.name} mode={args.mode} seed={args.seed}: {result.executions} executions, "
        f"{result.interleavings_explored} checked, statuses {ev['statuses']}"
        + (", exhausted" if result.exhausted else "")
    )
    print(f"steps reached: {ev['steps_reached']}; faults fired: {ev['faults_fired']}")
    for item in result.replayed_first:
        print(f"replayed first: {item['trace']}: {item['result']}")
    if args.trace is not None:
        chosen: Execution | None = result.failures[0] if result.failures else None
        if chosen is None and result.last is not None:
            chosen = result.last
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


async def _replay(path: Path, *, strict: bool) -> int:
    trace = read_trace(path)
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
    print(f"outcome: {texts[0].status}" + "".join(f"; {v.message}" for v in texts[0].violations))
    return verdict


async def _shrink(path: Path, output: Path | None) -> int:
    trace = read_trace(path)
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
