"""Measure the simulator's overhead per parked step, on the provider's PostgreSQL.

    python bench/bench_simulator.py --output bench/results/simulator.json

Three figures:

- ``park_only``: workers that only call ``probe.step`` (no SQL): the pure cost of a
  scheduler decision (park, choose, release, quiesce);
- ``sql_step``: workers that run ``SELECT 1`` on their own connection before every
  step, under the simulator and, as baselines, with ``NullProbe`` under plain
  ``asyncio.gather`` (concurrent) and on one connection (serial, which is what the
  simulator does by design); the difference to serial is the overhead a product
  transaction pays per named write.

Simulated figures are marginal (the cost of extra steps), so per-execution costs
(setup, connecting, check) are excluded; they show up in ``demo_exhaustive``;
- ``demo_exhaustive``: wall time per execution of the read-then-insert demonstration
  in exhaustive mode (setup, connections, steps, check).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg

from scheduling.ports import NullProbe
from simulation.engine.checkers.violation import Violation
from simulation.engine.scenario import ExecutionView, Scenario, ScenarioWorld, WorkerContext
from simulation.engine.simulator import Simulator
from simulation.engine.targets import SharedDatabase
from simulation.provider import acquire_server
from simulation.scenarios.demo import DUPLICATE


async def _no_setup(world: ScenarioWorld) -> None:
    return None


async def _no_check(world: ScenarioWorld, view: ExecutionView) -> list[Violation]:
    return []


def _scenario(workers: int, steps: int, sql: bool) -> Scenario:
    async def worker(ctx: WorkerContext) -> None:
        conn = await ctx.connect() if sql else None
        for _ in range(steps):
            if conn is not None:
                await conn.fetchval("SELECT 1")
            await ctx.probe.step("bench.step")

    return Scenario(
        name=f"bench.{'sql' if sql else 'park'}",
        summary="",
        setup=_no_setup,
        workers={f"w{i}": worker for i in range(workers)},
        check=_no_check,
        steps=("bench.step",),
        max_steps=workers * (steps + 1) + 1,
    )


async def _baseline(url: str, workers: int, steps: int) -> float:
    probe = NullProbe()
    conns = [await asyncpg.connect(url) for _ in range(workers)]

    async def worker(conn: Any) -> None:
        for _ in range(steps):
            await conn.fetchval("SELECT 1")
            await probe.step("bench.step")

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for conn in conns:
        await conn.close()
    return elapsed


async def _timed(sim: Simulator, scenario: Scenario, seed: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    execution = await sim.run_random(scenario, seed)
    elapsed = time.perf_counter() - t0
    assert execution.status == "pass", execution.trace["violations"]
    return elapsed, len(execution.decisions)


async def _marginal(sim: Simulator, workers: int, steps: int, sql: bool, seed: int) -> float:
    """Microseconds per extra decision: (long run - short run) / extra decisions, so
    per-execution costs (setup, connections, check) cancel out."""
    short_t, short_n = await _timed(sim, _scenario(workers, steps, sql), seed)
    long_t, long_n = await _timed(sim, _scenario(workers, 3 * steps, sql), seed)
    return (long_t - short_t) / (long_n - short_n) * 1e6


async def measure(url: str, workers: int, steps: int, repeats: int) -> dict[str, Any]:
    sim = Simulator(SharedDatabase(url))
    await _timed(sim, _scenario(workers, steps, sql=True), 0)  # warm up
    park_us: list[float] = []
    sql_us: list[float] = []
    base_us: list[float] = []
    serial_us: list[float] = []
    for r in range(repeats):
        park_us.append(await _marginal(sim, workers, steps, False, r))
        sql_us.append(await _marginal(sim, workers, steps, True, r))
        base_us.append(await _baseline(url, workers, steps) / (workers * steps) * 1e6)
        serial_us.append(await _baseline(url, 1, workers * steps) / (workers * steps) * 1e6)
    t0 = time.perf_counter()
    explored = await sim.explore(DUPLICATE, mode="exhaustive", executions=10_000)
    demo_s = time.perf_counter() - t0
    sql_median = statistics.median(sql_us)
    base_median = statistics.median(base_us)
    serial_median = statistics.median(serial_us)
    return {
        "workers": workers,
        "steps_per_worker": steps,
        "repeats": repeats,
        "park_only_us_per_step": {
            "median": round(statistics.median(park_us), 1),
            "min": round(min(park_us), 1),
        },
        "sql_step_us": {
            "simulated_median": round(sql_median, 1),
            "baseline_concurrent_median": round(base_median, 1),
            "baseline_serial_median": round(serial_median, 1),
            "overhead_per_parked_step_vs_serial": round(sql_median - serial_median, 1),
        },
        "demo_exhaustive": {
            "executions": explored.executions,
            "seconds": round(demo_s, 3),
            "ms_per_execution": round(demo_s / max(1, explored.executions) * 1000, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("bench/results/simulator.json"))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with acquire_server() as server:
        url = server.create_database()
        try:
            result = asyncio.run(measure(url, args.workers, args.steps, args.repeats))
            result["postgres"] = server.info.version
        finally:
            server.drop_database(url)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
