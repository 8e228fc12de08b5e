"""Measure the PostgreSQL provider: initdb, start, template clone, drop, acquire.

    python bench/bench_database.py --output bench/results/database.json

Uses the same code paths as the test fixtures (the cluster class of the watchdog,
``acquire_server``, ``ensure_template``/``create_database``/``drop_database``).
Clone and drop are also timed as bare SQL on one open connection, to separate the
server's work from our per-call connection overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from simulation.provider import DatabaseServer, acquire_server
from simulation.provider._binaries import find_embedded, find_local
from simulation.provider._cluster import Cluster, make_root, remove_root
from simulation.provider._info import SHM_DIR
from simulation.provider.templates import build_migrated, migrated_template_key


def summary(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(samples),
        "median_ms": round(statistics.median(samples) * 1000, 2),
        "p95_ms": round(p95 * 1000, 2),
        "min_ms": round(ordered[0] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


def bench_cluster(base: Path, runs: int) -> dict[str, Any]:
    """initdb and start (to "ready") of fresh clusters under ``base``."""
    binaries = find_local(os.environ) or find_embedded()
    if binaries is None:
        raise SystemExit("no PostgreSQL binaries: see docs/operations/database-provider.md")
    initdb: list[float] = []
    start: list[float] = []
    stop: list[float] = []
    for _ in range(runs):
        root = make_root(base)
        cluster = Cluster(root, binaries, os.environ)
        try:
            t0 = time.perf_counter()
            cluster.initdb()
            t1 = time.perf_counter()
            cluster.start()
            t2 = time.perf_counter()
            cluster.stop()
            t3 = time.perf_counter()
        finally:
            cluster.stop()
            remove_root(root)
        initdb.append(t1 - t0)
        start.append(t2 - t1)
        stop.append(t3 - t2)
    return {
        "base_dir": str(base),
        "binaries": str(binaries.bindir),
        "version": cluster.version,
        "initdb": summary(initdb),
        "start": summary(start),
        "stop_fast_shutdown": summary(stop),
    }


async def bench_sql(server: DatabaseServer, template: str, runs: int) -> dict[str, Any]:
    """CREATE DATABASE … TEMPLATE … STRATEGY x, and DROP … WITH (FORCE), as bare SQL."""
    conn = await asyncpg.connect(server.info.dsn)
    result: dict[str, Any] = {}
    try:
        for strategy in ("FILE_COPY", "WAL_LOG"):
            clone: list[float] = []
            drop: list[float] = []
            for i in range(runs):
                name = f"bench_{strategy.lower()}_{os.getpid()}_{i}"
                t0 = time.perf_counter()
                await conn.execute(
                    f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY {strategy}'
                )
                t1 = time.perf_counter()
                await conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                t2 = time.perf_counter()
                clone.append(t1 - t0)
                drop.append(t2 - t1)
            result[f"clone_{strategy.lower()}"] = summary(clone)
            result[f"drop_after_{strategy.lower()}"] = summary(drop)
    finally:
        await conn.close()
    return result


def bench_server(base: Path, runs: int) -> dict[str, Any]:
    """acquire_server end to end, template build, and the fixtures' create/drop calls."""
    env = dict(os.environ)
    for key in (
        "SCHEDULING_DATABASE_URL",
        "SCHEDULING_DATABASE_INFO",
        "SCHEDULING_DATABASE_BROKER",
    ):
        env.pop(key, None)
    env["SCHEDULING_PG_DIR"] = str(base)
    t0 = time.perf_counter()
    server = acquire_server(env)
    acquired = time.perf_counter() - t0
    try:
        template_kind = "migrated"
        t0 = time.perf_counter()
        try:
            template = server.ensure_template(migrated_template_key(), build_migrated)
        except Exception as exc:  # the migration chain is another module's; keep measuring
            template_kind = f"empty ({type(exc).__name__}: {exc})"
            template = server.ensure_template("bench-empty", lambda url: None)
        built = time.perf_counter() - t0
        api_create: list[float] = []
        api_drop: list[float] = []
        for _ in range(runs):
            t1 = time.perf_counter()
            url = server.create_database(template=template)
            t2 = time.perf_counter()
            server.drop_database(url)
            t3 = time.perf_counter()
            api_create.append(t2 - t1)
            api_drop.append(t3 - t2)
        sql = asyncio.run(bench_sql(server, template, runs))
        return {
            "base_dir": str(base),
            "source": server.info.source,
            "version": server.info.version,
            "durability": server.info.durability,
            "acquire_server_ms": round(acquired * 1000, 2),
            "template": template_kind,
            "template_build_ms": round(built * 1000, 2),
            "fixture_clone_strategy": server.clone_strategy,
            "fixture_create_database": summary(api_create),
            "fixture_drop_database": summary(api_drop),
            **sql,
        }
    finally:
        server.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("bench/results/database.json"))
    parser.add_argument("--runs", type=int, default=10, help="samples per cluster measurement")
    parser.add_argument("--clones", type=int, default=30, help="samples per clone measurement")
    args = parser.parse_args()
    bases = [Path(tempfile.gettempdir())]
    if SHM_DIR.is_dir():
        bases.insert(0, SHM_DIR)
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "cluster": [bench_cluster(base, args.runs) for base in bases],
        "server": [bench_server(base, args.clones) for base in bases],
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
