"""The HTTP control plane measured from outside, against an anchor in the same run.

    python bench/bench_http_external.py --output bench/results/http_external.json
        [--seconds 5] [--connections 1,8,32] [--workers 1[,2]] [--profile]

``scheduling serve`` runs in its own process (the composition root, development
settings, the durable principal directory) over a fresh migrated database from the
provider, with a token file holding one bearer token. Beside it, in another process,
bench/anchor_app.py (FastAPI + uvicorn + asyncpg: one bearer-token lookup, one
``SELECT ... LIMIT 50``) over the same database. ``wrk`` (Debian package; ``hey`` cannot
vary the Idempotency-Key per request) drives ``POST /v1/schedules`` (a fresh key per
request), ``GET /v1/schedules/{id}``, ``GET /v1/schedules?limit=50`` and
``GET /v1/schedules/{id}/occurrences`` at each connection count, each run of ours
right after an anchor run of the same length and connections (interleaved), so every
figure is a ratio to the anchor beside it. The load average is recorded beside each
pair. CPU per request is the server process tree's user+system time over the run
divided by its requests. ``--profile`` then samples the server with py-spy (not
during the measured runs) and names the top costs per operation.

``--workers 1,2`` measures ``scheduling serve --workers N`` for each N in turn (ADR
2320) against the same anchor process, database and load generator, so the figures at
1 and 2 workers sit side by side; every row names its worker count.

Writes the JSON to ``--output`` and a Markdown table beside it (same stem, ``.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from scheduling.testing import PostgresUnitOfWorkFactory, SystemClock, issue_token, upgrade_to_head
from simulation.provider import acquire_server
from simulation.worlds.http import OWNER, body
from simulation.worlds.service import CEILINGS, seed_durable

BENCH = Path(__file__).resolve().parent
OPERATIONS = ("create", "get", "list", "occurrences")
TARGETS = {"create": 0.3, "get": 0.5, "list": 0.5, "occurrences": 0.5}
READ_P99_MS_AT_8 = 50.0

WRK_SCRIPT = r"""
local counter = 0
-- Each thread's own number: a global set by setup in the thread's state (a chunk-level
-- local here would shadow it, every thread would read 0 and send the same keys).
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  prefix = args[1] .. "-" .. tostring(tid)
  keyed = args[2] == "keyed"
  if args[3] ~= nil and args[3] ~= "" then
    local f = io.open(args[3], "r")
    wrk.method = "POST"
    wrk.body = f:read("*a")
    f:close()
    wrk.headers["Content-Type"] = "application/json"
  end
end
function request()
  if keyed then
    counter = counter + 1
    wrk.headers["Idempotency-Key"] = prefix .. "-" .. counter
  end
  return wrk.format()
end
function done(summary, latency, requests)
  io.write(string.format(
    "WRKJSON {\"requests\":%d,\"duration_us\":%d,\"status_errors\":%d,\"connect\":%d," ..
    "\"read\":%d,\"write\":%d,\"timeout\":%d,\"p50_us\":%d,\"p99_us\":%d}\n",
    summary.requests, summary.duration, summary.errors.status, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ceiling_env() -> dict[str, str]:
    names = {
        "max_run_timeout_seconds": "TENANT_MAX_RUN_TIMEOUT_SECONDS",
        "max_misfire_grace_seconds": "TENANT_MAX_MISFIRE_GRACE_SECONDS",
        "max_steps": "TENANT_MAX_STEPS",
        "max_model_calls": "TENANT_MAX_MODEL_CALLS",
        "max_tool_calls": "TENANT_MAX_TOOL_CALLS",
        "max_cost_per_run": "TENANT_MAX_COST_PER_RUN",
        "max_active_runs": "TENANT_MAX_ACTIVE_RUNS",
        "max_materializations_per_minute": "TENANT_MAX_MATERIALIZATIONS_PER_MINUTE",
        "max_daily_cost": "TENANT_MAX_DAILY_COST",
        "max_monthly_cost": "TENANT_MAX_MONTHLY_COST",
    }
    values = CEILINGS.model_dump()
    return {f"AGENT_SCHEDULE_{env}": str(values[field]) for field, env in names.items()}


def server_env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SCHEDULE_")}
    env.update(
        {
            "AGENT_SCHEDULE_ENVIRONMENT": "development",
            "AGENT_SCHEDULE_API_ENABLED": "1",
            "AGENT_SCHEDULE_WORKER_ENABLED": "1",
            "AGENT_SCHEDULE_STORAGE": "postgres",
            "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "durable",
            "AGENT_SCHEDULE_ADMISSION": "postgres",
            "AGENT_SCHEDULE_DATABASE_URL": url,
            **ceiling_env(),
        }
    )
    return env


class ProcessCpu(NamedTuple):
    name: str  # ``comm``: the executable's name
    parent: int
    seconds: float  # user+system


def processes() -> dict[int, ProcessCpu]:
    """Every live process's name, parent and CPU, from ``/proc/<pid>/stat``."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, ProcessCpu] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        found[int(entry)] = ProcessCpu(
            name, int(fields[1]), (int(fields[11]) + int(fields[12])) / ticks
        )
    return found


def tree_cpu_seconds(pid: int) -> float:
    """User+system CPU of ``pid`` and its live descendants (uvicorn workers)."""
    live = processes()
    total, frontier = 0.0, [pid]
    while frontier:
        current = frontier.pop()
        total += live[current].seconds if current in live else 0.0
        frontier += [child for child, p in live.items() if p.parent == current]
    return total


def postgres_cpu() -> dict[int, float]:
    """User+system CPU of every live ``postgres`` process on this machine (the provider's
    server and its backends), by pid: what the database spent on a run, read as a
    difference (``postgres_cpu_delta``)."""
    return {pid: p.seconds for pid, p in processes().items() if p.name == "postgres"}


def postgres_cpu_delta(before: dict[int, float], after: dict[int, float]) -> float | None:
    """The database's CPU between two readings; ``None`` when a process of the first
    reading is gone (a pool's overflow backend that closed took its share with it)."""
    if any(pid not in after for pid in before):
        return None
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


@contextmanager
def process(argv: list[str], env: dict[str, str], log: Path, health: str) -> Iterator[int]:
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{argv[:3]} exited: {log.read_text()[-2000:]}")
                try:
                    if httpx.get(health, timeout=1).status_code < 500:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[:3]} did not answer {health}")
                time.sleep(0.2)
            yield proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


class Wrk:
    def __init__(self, workdir: Path, token: str, seconds: int) -> None:
        self.binary = shutil.which("wrk")
        if self.binary is None:
            raise SystemExit("wrk is not installed (apt-get install wrk)")
        self.script = workdir / "bench.lua"
        self.script.write_text(WRK_SCRIPT)
        self.body = workdir / "create.json"
        self.body.write_text(json.dumps(body(title="bench")))
        self.token = token
        self.seconds = seconds
        self.runs = 0

    def run(self, url: str, connections: int, *, create: bool, pid: int) -> dict[str, Any]:
        self.runs += 1
        threads = 1 if connections == 1 else 2
        argv = [
            str(self.binary),
            f"-t{threads}",
            f"-c{connections}",
            f"-d{self.seconds}s",
            "--timeout",
            "10s",
            "-H",
            f"Authorization: Bearer {self.token}",
            "-s",
            str(self.script),
            url,
            "--",
            f"r{self.runs}-{os.getpid()}",
            "keyed" if create else "plain",
            str(self.body) if create else "",
        ]
        cpu_before, pg_before = tree_cpu_seconds(pid), postgres_cpu()
        wrk_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(argv, capture_output=True, text=True, check=True)
        cpu = tree_cpu_seconds(pid) - cpu_before
        pg_cpu = postgres_cpu_delta(pg_before, postgres_cpu())
        wrk_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        wrk_cpu = (wrk_after.ru_utime + wrk_after.ru_stime) - (
            wrk_before.ru_utime + wrk_before.ru_stime
        )
        line = next(x for x in done.stdout.splitlines() if x.startswith("WRKJSON "))
        raw = json.loads(line.removeprefix("WRKJSON "))
        seconds = raw["duration_us"] / 1e6
        errors = sum(raw[k] for k in ("status_errors", "connect", "read", "write", "timeout"))
        return {
            "requests": raw["requests"],
            "rps": round(raw["requests"] / seconds, 1),
            "p50_ms": round(raw["p50_us"] / 1000, 2),
            "p99_ms": round(raw["p99_us"] / 1000, 2),
            "errors": errors,
            "server_cpu_ms_per_request": round(1000 * cpu / max(raw["requests"], 1), 3),
            # Where the rest of the two cores went: the database and the load generator.
            "postgres_cpu_ms_per_request": None
            if pg_cpu is None
            else round(1000 * pg_cpu / max(raw["requests"], 1), 3),
            "wrk_cpu_ms_per_request": round(1000 * wrk_cpu / max(raw["requests"], 1), 3),
        }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def profile(pid: int, wrk: Wrk, url: str, workdir: Path, *, create: bool) -> list[dict[str, Any]]:
    """py-spy samples the server while ``wrk`` drives ``url`` at 8 connections; the top
    functions by inclusive share of the busy samples (the request path's own code)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return [{"function": "py-spy not installed", "inclusive_pct": 0.0, "self_pct": 0.0}]
    out = workdir / f"profile-{wrk.runs}.txt"
    seconds = max(4, int(wrk.seconds))
    argv = [spy, "record", "-p", str(pid), "--subprocesses", "-d", str(seconds), "-r", "200"]
    argv += ["-f", "raw"]  # --subprocesses: serve --workers N samples its workers too
    sampler = subprocess.Popen(
        [*argv, "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(0.5)
    wrk.run(url, 8, create=create, pid=pid)
    sampler.wait(seconds + 30)
    inclusive: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    watched: Counter[str] = Counter()
    total = 0
    for line in out.read_text().splitlines() if out.exists() else []:
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        for frame in set(frames):
            where = "/" + frame.partition(" (")[2]
            if "/scheduling/" in where and "/cli/" not in where:
                inclusive[_short(frame)] += n
        by_package[_package(frames[-1])] += n
        for name, markers in WATCHED.items():
            if any(m in f for f in frames for m in markers):
                watched[name] += n
    if not total:
        return [{"samples": 0}]
    return [
        {
            "samples": total,
            "inclusive": [
                {"function": f, "inclusive_pct": round(100 * n / total, 1)}
                for f, n in inclusive.most_common(20)
            ],
            "watched_inclusive_pct": {
                name: round(100 * watched[name] / total, 1) for name in WATCHED
            },
            "self_by_package": [
                {"package": p, "self_pct": round(100 * n / total, 1)}
                for p, n in by_package.most_common(12)
            ],
        }
    ]


# Inclusive shares named in every profile: the edge middleware's own work (access
# log, metrics, request id and size limit) and the transaction bracket.
WATCHED = {
    "access log + metrics (EdgeMiddleware._log)": ("EdgeMiddleware._log",),
    "response header rewrite (send_with_id)": ("send_with_id",),
    "authentication (requires/authenticate)": ("authenticate (",),
    "unit of work open (__aenter__)": ("PostgresUnitOfWork.__aenter__",),
    "unit of work close (__aexit__)": ("PostgresUnitOfWork.__aexit__",),
    "wake-up NOTIFY (schedule_changed)": ("schedule_changed (",),
    "response model validation (serialize_response)": ("serialize_response (",),
}


def _short(frame: str) -> str:
    """``name (.../scheduling/http/routes.py:12)`` -> ``name (http/routes.py:12)``."""
    name, _, where = frame.partition(" (")
    return f"{name} ({'/'.join(where.rstrip(')').split('/')[-2:])})"


_PACKAGES = (
    ("/scheduling/http/", "scheduling.http"),
    ("/scheduling/service/", "scheduling.service"),
    ("/scheduling/domain/", "scheduling.domain"),
    ("/scheduling/adapters/", "scheduling.adapters"),
    ("/scheduling/", "scheduling (other)"),
    ("/sqlalchemy/", "sqlalchemy"),
    ("/asyncpg/", "asyncpg"),
    ("/pydantic", "pydantic"),
    ("/fastapi/", "fastapi"),
    ("/starlette/", "starlette"),
    ("/uvicorn/", "uvicorn"),
    ("/h11/", "h11"),
    ("/logging/", "logging"),
    ("/json/", "json"),
    ("/asyncio/", "asyncio"),
)


def _package(frame: str) -> str:
    where = "/" + frame.partition(" (")[2]
    for marker, name in _PACKAGES:
        if marker in where:
            return name
    parts = where.rstrip(")").split("/")
    return parts[-2] if len(parts) > 2 else parts[-1].rpartition(":")[0]


async def seed(url: str, token_path: Path) -> str:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=2)
    try:
        await seed_durable(admin, [OWNER], at=SystemClock().now())
    finally:
        await admin.dispose()
    _, token = issue_token(token_path, OWNER.tenant_id, OWNER.principal_id, SystemClock().now())
    return token


def warm(base: str, token: str) -> str:
    """60 schedules (list pages are full) and the id that get/occurrences read."""
    headers = {"Authorization": f"Bearer {token}"}
    first = ""
    with httpx.Client(base_url=base, headers=headers, timeout=30) as client:
        for n in range(60):
            answer = client.post(
                "/v1/schedules", json=body(title=f"warm {n}"), headers={"Idempotency-Key": f"w{n}"}
            )
            answer.raise_for_status()
            first = first or answer.json()["id"]
    return first


def ratio(ours: dict[str, Any], anchor: dict[str, Any]) -> float:
    return round(ours["rps"] / anchor["rps"], 3) if anchor["rps"] else 0.0


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"HTTP control plane vs anchor (bench/anchor_app.py), wrk, {report['seconds']} s per"
        f" run, interleaved; server workers: {report['workers']}; {report['cpus']} CPUs;"
        f" load average at start {report['loadavg_start']}, at end {report['loadavg_end']}.",
        "",
        "| workers | op | conns | rps | p50 ms | p99 ms | anchor rps | anchor p50 | anchor p99"
        " | ratio | target | server CPU ms/req (anchor) | postgres CPU ms/req (anchor)"
        " | errors | load 1m |",
        "|" + " --- |" * 15,
    ]
    for row in report["runs"]:
        ours, anchor = row["ours"], row["anchor"]
        target = TARGETS[row["op"]]
        met = "met" if row["ratio"] >= target else "missed"
        lines.append(
            f"| {row.get('workers', 1)} | {row['op']} | {row['connections']} | {ours['rps']} |"
            f" {ours['p50_ms']} |"
            f" {ours['p99_ms']} | {anchor['rps']} | {anchor['p50_ms']} | {anchor['p99_ms']} |"
            f" {row['ratio']} | ≥ {target} ({met}) | {ours['server_cpu_ms_per_request']}"
            f" ({anchor['server_cpu_ms_per_request']}) | {ours.get('postgres_cpu_ms_per_request')}"
            f" ({anchor.get('postgres_cpu_ms_per_request')})"
            f" | {ours['errors']}/{anchor['errors']}"
            f" | {row['loadavg'][0]} |"
        )
    reads = [
        r
        for r in report["runs"]
        if r["connections"] == 8 and r["op"] in ("get", "list", "occurrences")
    ]
    for workers in sorted({r.get("workers", 1) for r in reads}):
        worst = max(r["ours"]["p99_ms"] for r in reads if r.get("workers", 1) == workers)
        verdict = "met" if worst <= READ_P99_MS_AT_8 else "missed"
        lines += [
            "",
            f"Read p99 at 8 connections, {workers} worker(s): worst {worst} ms"
            f" (≤ {READ_P99_MS_AT_8} ms: {verdict}).",
        ]
    for op, samples in report.get("profile", {}).items():
        if not samples or "inclusive" not in samples[0]:
            continue
        top = samples[0]
        packages = ", ".join(f"{r['package']} {r['self_pct']}%" for r in top["self_by_package"])
        lines += ["", f"Top costs, {op} ({top['samples']} samples, py-spy):", ""]
        lines += [f"- self time by package: {packages}"]
        watched = top.get("watched_inclusive_pct", {})
        lines += [f"- {name}: {pct}% inclusive" for name, pct in watched.items() if pct]
        lines += [
            f"- {r['inclusive_pct']}% inclusive: `{r['function']}`" for r in top["inclusive"][:12]
        ]
    return "\n".join(lines) + "\n"


class Measure:
    """One server (at one worker count) measured beside the anchor, interleaved."""

    def __init__(
        self, wrk: Wrk, base: str, token: str, anchor_url: str, apid: int, pid: int
    ) -> None:
        self.wrk, self.anchor_url, self.apid, self.pid = wrk, anchor_url, apid, pid
        schedule_id = warm(base, token)
        self.paths = {
            "create": f"{base}/v1/schedules",
            "get": f"{base}/v1/schedules/{schedule_id}",
            "list": f"{base}/v1/schedules?limit=50",
            "occurrences": f"{base}/v1/schedules/{schedule_id}/occurrences",
        }

    def all(self, ops: list[str], connections: list[int], workers: int) -> list[dict[str, Any]]:
        wrk, seconds = self.wrk, self.wrk.seconds
        wrk.seconds = 1
        for op in ops:  # warm both servers on every path
            wrk.run(self.anchor_url, 2, create=False, pid=self.apid)
            wrk.run(self.paths[op], 2, create=op == "create", pid=self.pid)
        wrk.seconds = seconds
        runs: list[dict[str, Any]] = []
        for conns in connections:
            for op in ops:
                load = loadavg()
                anchor = wrk.run(self.anchor_url, conns, create=False, pid=self.apid)
                ours = wrk.run(self.paths[op], conns, create=op == "create", pid=self.pid)
                runs.append(
                    {
                        "workers": workers,
                        "op": op,
                        "connections": conns,
                        "loadavg": load,
                        "anchor": anchor,
                        "ours": ours,
                        "ratio": ratio(ours, anchor),
                    }
                )
                print(json.dumps(runs[-1]), flush=True)
        return runs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", default="1,8,32")
    parser.add_argument("--ops", default=",".join(OPERATIONS))
    parser.add_argument(
        "--workers", default="1", help="scheduling serve --workers; a list (1,2) measures each"
    )
    parser.add_argument("--profile", action="store_true", help="py-spy after the measured runs")
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="serve the product from this tree's src/ (e.g. an export of an older commit)",
    )
    args = parser.parse_args()
    if args.source is not None and not (args.source / "src" / "scheduling").is_dir():
        # Otherwise the server quietly imports the installed tree: a "before" of the after.
        parser.error(f"--source {args.source}: no src/scheduling there (give the tree's root)")
    connections = [int(c) for c in args.connections.split(",") if c.strip()]
    ops = [o for o in args.ops.split(",") if o]
    counts = [int(w) for w in args.workers.split(",") if w.strip()]
    started = loadavg()
    db = acquire_server()
    runs: list[dict[str, Any]] = []
    profiles: dict[str, Any] = {}
    try:
        url = db.create_database()
        asyncio.run(upgrade_to_head(url))
        with tempfile.TemporaryDirectory(prefix="bench-http-") as tmp:
            workdir = Path(tmp)
            token_path = workdir / "tokens.json"
            token = asyncio.run(seed(url, token_path))
            anchor_port = free_port()
            anchor_argv = [
                sys.executable,
                str(BENCH / "anchor_app.py"),
                "--database-url",
                url,
                "--tokens-file",
                str(token_path),
                "--port",
                str(anchor_port),
            ]
            anchor_base = f"http://127.0.0.1:{anchor_port}"
            env = server_env(url)
            if args.source is not None:
                env["PYTHONPATH"] = str(args.source.resolve() / "src")
            wrk = Wrk(workdir, token, args.seconds)
            with process(anchor_argv, env, workdir / "anchor.log", f"{anchor_base}/docs") as apid:
                for workers in counts:
                    port = free_port()
                    serve = [
                        str(Path(sys.executable).parent / "scheduling"),
                        "serve",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(port),
                        "--tokens-file",
                        str(token_path),
                    ]
                    if workers != 1:
                        serve += ["--workers", str(workers)]
                    base = f"http://127.0.0.1:{port}"
                    log = workdir / f"server-{workers}.log"
                    with process(serve, env, log, f"{base}/healthz") as pid:
                        measure = Measure(wrk, base, token, f"{anchor_base}/anchor", apid, pid)
                        runs += measure.all(ops, connections, workers)
                        if args.profile:
                            for op in ops:
                                profiles[f"{op} ({workers} workers)"] = profile(
                                    pid, wrk, measure.paths[op], workdir, create=op == "create"
                                )
                if args.profile:
                    profiles["anchor"] = profile(
                        apid, wrk, f"{anchor_base}/anchor", workdir, create=False
                    )
                    if args.output is not None:  # the raw samples, to read beyond the top 20
                        for raw in sorted(workdir.glob("profile-*.txt")):
                            kept = args.output.with_name(f"{args.output.stem}-{raw.name}")
                            shutil.copy(raw, kept)
        db.drop_database(url)
    finally:
        db.close()
    report = {
        "benchmark": "http_external",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_generator": "wrk",
        "seconds": args.seconds,
        "workers": counts if len(counts) > 1 else counts[0],
        "source": None if args.source is None else str(args.source),
        "loadavg_start": started,
        "loadavg_end": loadavg(),
        "runs": runs,
        "profile": profiles,
    }
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
        args.output.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
