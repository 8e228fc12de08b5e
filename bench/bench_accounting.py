"""Post-run accounting lag: from a run finishing to its ``schedule.run_accounted`` event.

    python bench/bench_accounting.py --output bench/results/accounting.json

On the provider's PostgreSQL, one fresh database per arm from the migrated template:
``--runs`` schedules are seeded and materialized (``bench/materialize_world.py``), so
that many QUEUED scheduled runs exist; then, for ``--seconds``, the harness finishes
them at a steady ``--rate`` per second (an UPDATE to COMPLETED stamping
``finished_at``: what a run worker's terminal write does to the row, without the run
work, which this benchmark does not measure) while ``schedulers`` scheduler processes,
each built through ``scheduling.bootstrap.build_scheduler`` and running the real loop
(``ScheduleWorker.run``: passes, the 1 s accounting poll, claimed disjoint batches,
ADR 2221), account them. Lag = the accounting event's ``occurred_at`` (the
accountant's clock) minus ``finished_at`` (the same clock, the harness's), per run.

Arms: ``schedulers=2`` (the figure; target p99 <= 2 s) beside the anchor
``schedulers=1`` in the same invocation and load; the report gives p50/p99/max per arm,
the ratio of the two p99s, runs left unaccounted at the end, and the 1-minute load
average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from materialize_world import OFFSET, ShiftedClock, seed, settings_for

from scheduling.bootstrap import SchedulerSettings, build_scheduler
from scheduling.service.materializer import MaterializeStatus
from scheduling.testing import RandomIds, SystemClock
from simulation.provider import DatabaseServer, acquire_server
from simulation.provider.templates import build_migrated, migrated_template_key

TICK = 0.05


def _delta(nominal: datetime) -> timedelta:
    """The shift that makes the scheduler's clock read ``nominal + OFFSET`` now."""
    return SystemClock().now() - (nominal + OFFSET)


async def _materialize_all(url: str, delta: timedelta, runs: int) -> int:
    role = build_scheduler(
        SchedulerSettings.of(settings_for(url)), clock=ShiftedClock(delta), ids=RandomIds()
    )
    decided = 0
    try:
        while decided < runs:
            report = await role.worker.run_once()
            step = report.count(MaterializeStatus.DECIDED)
            if step == 0 and not report.yielded:
                break
            decided += step
    finally:
        await role.close()
    return decided


async def _scheduler(url: str, delta: timedelta, ready: Any, stop: Any) -> dict[str, Any]:
    role = build_scheduler(
        SchedulerSettings.of(settings_for(url)), clock=ShiftedClock(delta), ids=RandomIds()
    )
    cpu = time.process_time()
    try:
        await role.worker.run_once()  # connected and warm before the clock starts
        ready.put(os.getpid())
        await role.worker.run(stop.is_set)
    finally:
        await role.close()
    return {"cpu_seconds": round(time.process_time() - cpu, 3)}


def scheduler_process(args: tuple[str, timedelta, Any, Any]) -> dict[str, Any]:
    return asyncio.run(_scheduler(*args))


async def _finisher(url: str, delta: timedelta, rate: float, seconds: float) -> int:
    """Finish queued runs at ``rate`` per second for ``seconds`` (oldest first)."""
    conn = await asyncpg.connect(url)
    shift = delta.total_seconds()
    finished, carry = 0, 0.0
    try:
        started = time.monotonic()
        while time.monotonic() - started < seconds:
            carry += rate * TICK
            n, carry = int(carry), carry - int(carry)
            if n:
                rows = await conn.fetch(
                    "UPDATE runs SET status = 'COMPLETED', lease_owner = NULL,"
                    " lease_expires_at = NULL,"
                    " finished_at = clock_timestamp() - make_interval(secs => $2),"
                    " updated_at = clock_timestamp() - make_interval(secs => $2)"
                    " WHERE id IN (SELECT id FROM runs WHERE status = 'QUEUED'"
                    " ORDER BY created_at, id LIMIT $1) RETURNING id",
                    n,
                    shift,
                )
                finished += len(rows)
            await asyncio.sleep(TICK)
    finally:
        await conn.close()
    return finished


LAGS = """
SELECT EXTRACT(EPOCH FROM (e.occurred_at - r.finished_at))::float8 AS lag
FROM runs r
JOIN schedule_occurrences o ON o.run_id = r.id
JOIN process_events e ON e.event_type = 'schedule.run_accounted'
 AND e.schedule_id = o.schedule_id AND e.payload ->> 'occurrence_id' = o.id::text
WHERE r.status = 'COMPLETED'
"""


async def _lags(url: str) -> tuple[list[float], int]:
    conn = await asyncpg.connect(url)
    try:
        lags = [float(r["lag"]) for r in await conn.fetch(LAGS)]
        done = await conn.fetchval("SELECT count(*) FROM runs WHERE status = 'COMPLETED'")
    finally:
        await conn.close()
    return lags, int(done) - len(lags)


def _pct(values: list[float], q: int) -> float:
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 3)


def arm(
    server: DatabaseServer, template: str, schedulers: int, runs: int, rate: float, seconds: float
) -> dict[str, Any]:
    url = server.create_database(template)
    try:
        nominal = asyncio.run(seed(url, runs, max(1, runs // 25)))
        delta = _delta(nominal)
        queued = asyncio.run(_materialize_all(url, delta, runs))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Manager() as manager, ctx.Pool(schedulers) as pool:
            ready, stop = manager.Queue(), manager.Event()
            pending = pool.map_async(scheduler_process, [(url, delta, ready, stop)] * schedulers)
            for _ in range(schedulers):  # every process built, connected, one pass done
                ready.get(timeout=120)
            finished = asyncio.run(_finisher(url, delta, rate, seconds))
            deadline = time.monotonic() + 30.0  # the tail: until all are accounted
            while time.monotonic() < deadline and asyncio.run(_lags(url))[1] > 0:
                time.sleep(0.5)
            stop.set()
            procs = pending.get(timeout=120)
        lags, unaccounted = asyncio.run(_lags(url))
    finally:
        server.drop_database(url)
    return {
        "schedulers": schedulers,
        "queued": queued,
        "finished": finished,
        "accounted": len(lags),
        "unaccounted_at_end": unaccounted,
        "lag_seconds": {
            "p50": _pct(lags, 50),
            "p99": _pct(lags, 99),
            "max": round(max(lags), 3),
        }
        if lags
        else None,
        "scheduler_cpu_seconds": [p["cpu_seconds"] for p in procs],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("bench/results/accounting.json"))
    parser.add_argument("--runs", type=int, default=1200)
    parser.add_argument("--rate", type=float, default=100.0, help="runs finished per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with acquire_server() as server:
        template = server.ensure_template(migrated_template_key(), build_migrated)
        load_before = os.getloadavg()
        anchor = arm(server, template, 1, args.runs, args.rate, args.seconds)
        figure = arm(server, template, 2, args.runs, args.rate, args.seconds)
        load_after = os.getloadavg()
    ratio = None
    if anchor["lag_seconds"] and figure["lag_seconds"] and anchor["lag_seconds"]["p99"]:
        ratio = round(figure["lag_seconds"]["p99"] / anchor["lag_seconds"]["p99"], 3)
    report = {
        "benchmark": "accounting_lag",
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "rate_per_second": args.rate,
        "seconds": args.seconds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "anchor_one_scheduler": anchor,
        "two_schedulers": figure,
        "p99_ratio_two_to_one": ratio,
        "target_p99_seconds": 2.0,
        "meets_target": bool(figure["lag_seconds"] and figure["lag_seconds"]["p99"] <= 2.0),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
