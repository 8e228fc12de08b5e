"""Schedule-worker drain rate beside pgbench tpcb-like on the same server, same run.

    python bench/bench_materialize.py --output bench/results/materialize.json

On the provider's PostgreSQL (``simulation.database.acquire_server``; its durability
settings are recorded), for 1, 2 and 4 schedule workers (one process each, built
through ``scheduling.bootstrap.build_scheduler``): seed ``--schedules`` due schedules
and drain them; report the drain rate, statements, transactions and new server
sessions per materialization, the lag percentiles and worker RSS. The anchor is
pgbench's built-in tpcb-like at 1, 2 and 4 clients on the same server in the same run.
Anchor and drains run ``--rounds`` times (default 3), interleaved (pgbench, then the
drains, per round), and every figure that matters is reported as a range over the
rounds (``range``: min and max of drain rate, pgbench TPS, their ratio and client CPU
per decision, with the load average around each round); ``drain`` and ``pgbench.tps``
hold the round whose ratio is the median, in the shape ``bench/table.py`` reads.
The timed drains run without the statement and round-trip counters, which cost client
CPU; one counted drain per worker count after the rounds gives those counts (copied into
every round) and shows its own CPU under ``counted_drain``.
A burst (``--burst``) of schedules due at one instant is drained by one worker with
the configured in-worker concurrency. Numbers on a shared 2-core machine are noisy.

Each round also replays one worker's drain (``--replay``, the default; ADR 2730): a
capturing drain records the transactions the driver sent, and ``drain_replay`` sends
them again through bare asyncpg on copies of the same world, at 1 connection and at the
worker's concurrency. Same statements, arguments and rows: the replay's rate is what
the spec's writes allow with the thinnest client, ``ratio_to_pgbench`` beside it, and
``drain_to_replay`` the share of it the worker reaches.

``--durable`` runs the same rounds (anchor and drains) again on a private cluster with
production durability (fsync, synchronous_commit and full_page_writes on) in a data
directory on disk under ``--durable-dir`` (default the temp dir; tmpfs is refused), and
reports it under ``durable`` in the same shape. The provider's server (fsync off,
usually on tmpfs) shows the client's own cost; the durable one is the production-shaped
ratio (ADR 2340). Each server's settings (``SHOW``) are recorded under ``server``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from drain_replay import ReplayResult, replay_process, transactions_of
from materialize_world import (
    CAPTURE,
    COUNTED,
    EVENT_LOOP,
    IN_FLIGHT,
    DrainResult,
    admission_cost,
    drain_process,
    seed,
    server_counters,
)

from scheduling.cli.role_loop import role_loop_name
from simulation.provider import DatabaseServer, acquire_server
from simulation.provider._cluster import BASE_DIR_ENV
from simulation.provider._info import database_of, on_shm
from simulation.provider._private import private_cluster
from simulation.provider.templates import build_migrated, migrated_template_key

PGBENCH = Path("/usr/lib/postgresql/15/bin/pgbench")
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def pgbench(
    server: DatabaseServer, clients: list[int], seconds: int, scale: int
) -> dict[int, float]:
    """tpcb-like TPS (excluding connection time) at each client count."""
    exe = shutil.which("pgbench") or str(PGBENCH)
    url = server.create_database()
    parts = urlsplit(url)
    env = {**os.environ, "PGPASSWORD": parts.password or ""}
    base = [exe, "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432)]
    base += ["-U", parts.username or "postgres"]
    db = parts.path.lstrip("/")
    try:
        subprocess.run(
            [*base, "-i", "-q", "-s", str(scale), db], env=env, check=True, capture_output=True
        )
        out: dict[int, float] = {}
        for n in clients:
            run = subprocess.run(
                [*base, "-c", str(n), "-j", str(n), "-T", str(seconds), "-n", db],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            match = re.search(r"tps = ([0-9.]+) \(without initial connection time\)", run.stdout)
            assert match, run.stdout
            out[n] = float(match.group(1))
        return out
    finally:
        server.drop_database(url)


def percentiles(samples: list[float]) -> dict[str, float] | None:
    if len(samples) < 2:
        return None
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"p50": round(cuts[49], 4), "p95": round(cuts[94], 4), "p99": round(cuts[98], 4)}


def drain_run(
    server: DatabaseServer,
    template: str,
    schedules: int,
    tenants: int,
    workers: int,
    extra: dict[str, Any],
) -> dict[str, Any]:
    url = server.create_database(template)
    try:
        nominal = asyncio.run(seed(url, schedules, tenants))
        before = asyncio.run(server_counters(url))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(workers) as pool:
            real_start = time.monotonic() + 3.0  # after every process has imported
            started = time.perf_counter()
            results: list[DrainResult] = pool.map(
                drain_process, [(url, nominal, real_start, extra)] * workers
            )
        after = asyncio.run(server_counters(url))
        decided = asyncio.run(_decided(url))
    finally:
        server.drop_database(url)
    del started
    seconds = max(r.seconds for r in results)
    statements: Counter[str] = Counter()
    control: Counter[str] = Counter()
    for r in results:
        statements.update(r.statements)
        control.update(r.control)
    total = sum(statements.values())
    lags = [lag for r in results for lag in r.lags]
    counts = {
        "statements_per_materialization": round(total / decided, 2),
        "statements_by_verb": dict(sorted(statements.items())),
        "round_trips_per_materialization": round(sum(r.round_trips for r in results) / decided, 2),
        "transaction_control_by_verb": dict(sorted(control.items())),
        "transactions_per_materialization": round(
            sum(r.transactions for r in results) / decided, 3
        ),
    }
    return {
        "workers": workers,
        "schedules": schedules,
        "tenants": tenants,
        "decided": decided,
        "seconds": round(seconds, 3),
        "rate_per_second": round(decided / seconds, 1),
        "client_cpu_ms_per_materialization": round(
            1000 * sum(r.cpu_seconds for r in results) / decided, 3
        ),
        "client_system_cpu_ms_per_materialization": round(
            1000 * sum(r.system_seconds for r in results) / decided, 3
        ),
        **server_share(results, decided),
        **(counts if extra.get(COUNTED, True) else {}),
        "server_commits_per_materialization": round(
            (after["xact_commit"] - before["xact_commit"]) / decided, 3
        ),
        "new_connections_per_materialization": round(
            (after["sessions"] - before["sessions"] - 1) / decided, 3
        ),
        "passes": [r.passes for r in results],
        "not_due": [r.not_due for r in results],
        "lag_seconds": percentiles(lags),
        "rss_kib": [r.rss_kib for r in results],
        "rss_kib_at_decisions": [r.rss_at for r in results],
    }


def server_share(results: list[DrainResult], decided: int) -> dict[str, float | None]:
    """The server backends' CPU per decision, and the rate both together allow on this
    machine's cores if nothing ever waited: ``cpus / (client + server CPU)``. A drain
    cannot beat that ceiling, so a ratio target above ``ceiling / pgbench`` is out of
    reach for this work here whatever the client does (ADR 2670). ``None`` when the
    server's processes are not readable from here."""
    server = [r.server_cpu_seconds for r in results]
    if decided == 0 or any(s is None for s in server):
        return {"server_cpu_ms_per_materialization": None, "cpu_bound_rate_per_second": None}
    client_ms = 1000 * sum(r.cpu_seconds for r in results) / decided
    server_ms = 1000 * sum(s for s in server if s is not None) / decided
    both = client_ms + server_ms
    cores = os.cpu_count() or 1
    return {
        "server_cpu_ms_per_materialization": round(server_ms, 3),
        "cpu_bound_rate_per_second": round(1000 * cores / both, 1) if both else None,
    }


def replay_run(
    server: DatabaseServer,
    template: str,
    schedules: int,
    tenants: int,
    loop: str,
    concurrencies: tuple[int, ...] = (1, IN_FLIGHT),
) -> dict[str, Any]:
    """One worker's drain, captured, then its transactions replayed through bare asyncpg
    on copies of the world it drained, at each of ``concurrencies`` connections (ADR
    2730). Refuses a replay that did not write what the drain wrote."""
    url = server.create_database(template)
    copies: list[str] = []
    try:
        nominal = asyncio.run(seed(url, schedules, tenants))
        copies = [server.create_database(database_of(url)) for _ in concurrencies]
        ctx = multiprocessing.get_context("spawn")
        extra = {EVENT_LOOP: loop, COUNTED: False, CAPTURE: True}
        with ctx.Pool(1) as pool:
            real_start = time.monotonic() + 3.0
            (captured,) = pool.map(drain_process, [(url, nominal, real_start, extra)])
        transactions = transactions_of(captured.captured)
        replays: dict[str, Any] = {}
        for concurrency, copy in zip(concurrencies, copies, strict=True):
            with ctx.Pool(1) as pool:
                (replayed,) = pool.map(replay_process, [(copy, transactions, concurrency)])
            written = asyncio.run(_decided(copy))
            if replayed.unwritten or written != captured.decided:
                raise RuntimeError(
                    f"the replay at {concurrency} connections wrote {written} occurrences "
                    f"({replayed.unwritten} decisions unwritten); the drain decided "
                    f"{captured.decided}"
                )
            replays[str(concurrency)] = replay_figures(replayed, written)
    finally:
        for database in [url, *copies]:
            server.drop_database(database)
    return {"decided": captured.decided, "transactions": len(transactions), "replay": replays}


def replay_figures(replayed: ReplayResult, decided: int) -> dict[str, Any]:
    server_ms = (
        None
        if replayed.server_cpu_seconds is None
        else round(1000 * replayed.server_cpu_seconds / decided, 3)
    )
    return {
        "rate_per_second": round(decided / replayed.seconds, 1),
        "client_cpu_ms_per_materialization": round(1000 * replayed.cpu_seconds / decided, 3),
        "server_cpu_ms_per_materialization": server_ms,
        "round_trips_per_materialization": round(replayed.round_trips / decided, 2),
    }


def judge_replay(replayed: dict[str, Any], drains: list[dict[str, Any]], pgbench_1: float) -> None:
    """Each replay's rate as a ratio to pgbench(1) beside it, and one worker's drain as a
    share of the replay at its own concurrency: how much of the gap to pgbench is the
    work (the replay's ratio) and how much the worker (``drain_to_replay``)."""
    for figures in replayed["replay"].values():
        figures["ratio_to_pgbench"] = round(figures["rate_per_second"] / pgbench_1, 4)
    drain = next(d for d in drains if d["workers"] == 1)
    matched = replayed["replay"][str(IN_FLIGHT)]
    replayed["drain_to_replay"] = round(drain["rate_per_second"] / matched["rate_per_second"], 4)
    replayed["drain_client_cpu_over_replay_ms"] = round(
        drain["client_cpu_ms_per_materialization"] - matched["client_cpu_ms_per_materialization"],
        3,
    )


async def _decided(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM schedule_occurrences"))
    finally:
        await conn.close()


COUNT_KEYS = (
    "statements_per_materialization",
    "statements_by_verb",
    "round_trips_per_materialization",
    "transaction_control_by_verb",
    "transactions_per_materialization",
)
"""What only a counted drain measures (its listeners cost CPU, so timed drains skip them)."""

BRIEF = (
    "rate_per_second",
    "ratio_to_pgbench",
    "client_cpu_ms_per_materialization",
    "server_cpu_ms_per_materialization",
    "cpu_bound_ratio_to_pgbench",
    "statements_per_materialization",
    "round_trips_per_materialization",
)


def _brief(drain: dict[str, Any]) -> dict[str, Any]:
    return {"workers": drain["workers"], **{k: drain[k] for k in BRIEF}}


def _median_round(rounds: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """The round whose ``workers`` drain has the median ratio to pgbench."""

    def ratio(r: dict[str, Any]) -> float:
        return float(next(d for d in r["drain"] if d["workers"] == workers)["ratio_to_pgbench"])

    ordered = sorted(rounds, key=ratio)
    return ordered[(len(ordered) - 1) // 2]


def span_known(values: list[float | None]) -> list[float] | None:
    """Min and max, or ``None`` if any round could not measure it."""
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known and len(known) == len(values) else None


def _range(rounds: list[dict[str, Any]], workers: int) -> dict[str, Any]:
    """Min and max over the rounds of the figures a target is judged by."""
    drains = [next(d for d in r["drain"] if d["workers"] == workers) for r in rounds]

    def span(values: list[float]) -> list[float]:
        return [min(values), max(values)]

    loads = [x for r in rounds for x in (r["load_average_before"][0], r["load_average_after"][0])]
    return {
        "rounds": len(rounds),
        "rate_per_second": span([d["rate_per_second"] for d in drains]),
        "pgbench_tps": span([r["tps"][workers] for r in rounds]),
        "ratio_to_pgbench": span([d["ratio_to_pgbench"] for d in drains]),
        "client_cpu_ms_per_materialization": span(
            [d["client_cpu_ms_per_materialization"] for d in drains]
        ),
        "client_system_cpu_ms_per_materialization": span(
            [d["client_system_cpu_ms_per_materialization"] for d in drains]
        ),
        "round_trips_per_materialization": span(
            [d["round_trips_per_materialization"] for d in drains]
        ),
        "server_cpu_ms_per_materialization": span_known(
            [d.get("server_cpu_ms_per_materialization") for d in drains]
        ),
        "cpu_bound_ratio_to_pgbench": span_known(
            [d.get("cpu_bound_ratio_to_pgbench") for d in drains]
        ),
        "load_average_1min": span(loads),
        # The replay is one worker's drain: judged beside that drain only.
        **(_replay_range([r["replay"] for r in rounds]) if workers == 1 else {}),
    }


def _replay_range(replays: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The replays' figures over the rounds (nothing when a round ran none)."""
    if not replays or any(r is None for r in replays):
        return {}
    known = [r for r in replays if r is not None]
    keys = (
        "rate_per_second",
        "ratio_to_pgbench",
        "client_cpu_ms_per_materialization",
        "server_cpu_ms_per_materialization",
    )
    return {
        "replay": {
            n: {k: span_known([r["replay"][n][k] for r in known]) for k in keys}
            for n in known[0]["replay"]
        },
        "drain_to_replay": span_known([r["drain_to_replay"] for r in known]),
        "drain_client_cpu_over_replay_ms": span_known(
            [r["drain_client_cpu_over_replay_ms"] for r in known]
        ),
    }


SETTINGS = (
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "wal_sync_method",
    "shared_buffers",
    "max_connections",
)


def server_settings(server: DatabaseServer) -> dict[str, Any]:
    """What decides a commit's cost on ``server``: the durability and WAL settings it
    runs with (``SHOW``) and whether its data directory is on tmpfs."""

    async def read() -> dict[str, Any]:
        conn = await asyncpg.connect(server.info.dsn)
        try:
            shown: dict[str, Any] = {
                name: str(await conn.fetchval(f"SHOW {name}")) for name in SETTINGS
            }
        finally:
            await conn.close()
        cluster_dir = server.info.to_dict().get("cluster_dir")
        shown["data_on_tmpfs"] = None if cluster_dir is None else on_shm(cluster_dir)
        shown["cluster_dir"] = cluster_dir
        return shown

    return asyncio.run(read())


def measure(server: DatabaseServer, args: argparse.Namespace, clients: list[int]) -> dict[str, Any]:
    """``--rounds`` of pgbench then the drains on ``server``, and the ranges over them."""
    template = server.ensure_template(migrated_template_key(), build_migrated)
    rounds: list[dict[str, Any]] = []
    for _ in range(max(1, args.rounds)):
        load_before = os.getloadavg()
        tps = pgbench(server, clients, args.pgbench_seconds, args.pgbench_scale)
        timed: dict[str, Any] = {EVENT_LOOP: args.loop, COUNTED: False}
        ran = [drain_run(server, template, args.schedules, args.tenants, n, timed) for n in clients]
        for d in ran:
            d["ratio_to_pgbench"] = round(d["rate_per_second"] / tps[d["workers"]], 4)
            ceiling = d["cpu_bound_rate_per_second"]
            d["cpu_bound_ratio_to_pgbench"] = (
                None if ceiling is None else round(ceiling / tps[d["workers"]], 4)
            )
        replayed = None
        if args.replay and 1 in clients:
            replayed = replay_run(server, template, args.schedules, args.tenants, args.loop)
            judge_replay(replayed, ran, tps[1])
        rounds.append(
            {
                "load_average_before": [round(x, 2) for x in load_before],
                "load_average_after": [round(x, 2) for x in os.getloadavg()],
                "tps": tps,
                "drain": ran,
                "replay": replayed,
            }
        )
    # The rounds' drains are timed without counters; one counted drain per worker count
    # gives the statements and round trips (the same per decision), and its CPU shows
    # what the counters cost.
    counted: dict[str, Any] = {EVENT_LOOP: args.loop, COUNTED: True}
    counts = {
        n: drain_run(server, template, args.schedules, args.tenants, n, counted) for n in clients
    }
    for r in rounds:
        for d in r["drain"]:
            d.update({k: counts[d["workers"]][k] for k in COUNT_KEYS})
    chosen = _median_round(rounds, clients[0])
    return {
        "template": template,
        "server": {
            "source": server.info.source,
            "version": server.info.version,
            "durability": server.info.durability,
            "settings": server_settings(server),
        },
        "pgbench": {
            "mode": "tpcb-like, simple protocol, -n, -j = -c",
            "scale": args.pgbench_scale,
            "seconds": args.pgbench_seconds,
            "tps": {str(k): v for k, v in chosen["tps"].items()},
        },
        "drain": chosen["drain"],
        "range": {str(n): _range(rounds, n) for n in clients},
        "counted_drain": {
            str(n): {
                "client_cpu_ms_per_materialization": c["client_cpu_ms_per_materialization"],
                "rate_per_second": c["rate_per_second"],
            }
            for n, c in counts.items()
        },
        "rounds": [
            {
                "load_average_before": r["load_average_before"],
                "load_average_after": r["load_average_after"],
                "pgbench_tps": {str(k): v for k, v in r["tps"].items()},
                "drain": [_brief(d) for d in r["drain"]],
                "replay": r["replay"],
            }
            for r in rounds
        ],
    }


def durable_base(directory: Path) -> Path:
    """Where the durable cluster goes: on disk, never tmpfs (a commit's fsync is the
    point of that server)."""
    if on_shm(directory.resolve()):
        raise SystemExit(f"--durable-dir {directory} is on tmpfs; give a directory on disk")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def measure_durable(args: argparse.Namespace, clients: list[int]) -> dict[str, Any]:
    """The same rounds on a private cluster with production durability (fsync,
    synchronous_commit, full_page_writes on) whose data directory is on disk."""
    base = durable_base(args.durable_dir)
    with private_cluster(durable=True, environ={**os.environ, BASE_DIR_ENV: str(base)}) as private:
        measured = measure(private.server, args, clients)
    measured.pop("template")
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("bench/results/materialize.json"))
    parser.add_argument("--schedules", type=int, default=4000)
    parser.add_argument("--tenants", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--pgbench-seconds", type=int, default=5)
    parser.add_argument("--pgbench-scale", type=int, default=4)
    parser.add_argument("--burst", type=int, default=10_000, help="0: skip the burst")
    parser.add_argument("--rounds", type=int, default=3, help="anchor + drains, repeated")
    parser.add_argument(
        "--admission-history", default="1000,1000000", help="historical runs (small,large)"
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="also run the rounds on a durable on-disk server (reported under 'durable')",
    )
    parser.add_argument(
        "--durable-dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="parent directory of the durable cluster (on disk, not /dev/shm)",
    )
    parser.add_argument(
        "--replay",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="per round, replay one worker's captured transactions through bare asyncpg "
        "(the same writes, the thinnest client; ADR 2730)",
    )
    parser.add_argument(
        "--loop",
        choices=("role", "asyncio", "uvloop"),
        default="role",
        help="the drain processes' event loop: the roles' own (uvloop where it imports, "
        "ADR 2640), or asyncio / uvloop named for an A/B (ADR 2440)",
    )
    args = parser.parse_args()
    clients = [int(w) for w in args.workers.split(",")]
    if args.durable:
        durable_base(args.durable_dir)  # refuse tmpfs before anything runs
    with acquire_server() as server:
        measured = measure(server, args, clients)
        template = measured.pop("template")
        burst = None
        if args.burst:
            burst = drain_run(server, template, args.burst, args.tenants, 1, {})
        admission = []
        for history in (int(h) for h in args.admission_history.split(",")):
            url = server.create_database(template)
            try:
                admission.append(asyncio.run(admission_cost(url, history, NOW, 300)))
            finally:
                server.drop_database(url)
    report: dict[str, Any] = {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        # The loop the drains ran on (``role`` resolved: uvloop where it imports).
        "event_loop": role_loop_name() if args.loop == "role" else args.loop,
        **measured,
        "burst": burst,
        "admission": admission,
    }
    if args.durable:
        report["durable"] = measure_durable(args, clients)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
