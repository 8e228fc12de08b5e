"""Soak: several schedule-worker processes against one database, then a ledger check.

``python -m simulation.scenarios.soak [--processes 3] [--schedules 120] [--seconds 120]
[--speed 3600] [--seed 1] [--url URL]`` (docs/operations/soak.md):

1. a database cloned from the migrated template (or ``--url``, an existing migrated
   database) gets one principal, the agent, and ``--schedules`` definitions created
   through the service: daily, weekly, monthly and one-time, over many zones;
2. ``--processes`` OS processes each run a ``ScheduleWorker`` loop (the materializer
   through the least-privilege scheduler role, the PostgreSQL admission controller,
   the accounting sweep) and a ``RunWorker`` slot (scripted agent) for ``--seconds``
   of wall time on a shared scaled clock: simulated time runs ``--speed`` times faster
   than wall time from one common origin, so every process agrees on "now";
3. a quiet pass decides everything due at the end instant, then the ledger check:
   no duplicate, no early, no partial (``simulation.engine.checkers.check_ledger``) and
   nothing lost - every nominal instant before a schedule's stored ``next_fire_at``
   (or up to its last decision, when paused or completed) is decided exactly once,
   by an occurrence or inside one ``schedule.misfires_coalesced`` range whose count
   matches the instants it spans.

Server modes (each starts its own servers): ``--server-crash-every`` (a private durable
cluster crashed and restarted), ``--failover`` (a synchronous standby the harness
promotes), ``--autofailover`` (a pg_auto_failover formation: switchover, failover and
a lost primary node, all through the manager, ``docs/operations/ha.md``),
``--private-server`` (a private durable cluster, no server fault: its log is read);
``--pgbouncer MODE`` puts a pgbouncer in front of the server and the workers go
through it. Besides the ledger check, a commit witness reads the occurrence and run
ids every 0.25 s through the workers' URL during the soak: every id it ever saw
committed must be in the final database. The report counts the ERROR lines of the
worker processes and of the PostgreSQL servers (and pgbouncer) by category.

Exit status 0 when the check passes, 1 otherwise; the summary is JSON on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import asyncpg
from sqlalchemy import text

from scheduling.bootstrap import SchedulerSettings, build_run_worker, build_scheduler
from scheduling.config import Settings
from scheduling.domain.cadence import parse_cadence
from scheduling.domain.recurrence.engine import next_after
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.clock import Clock
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings as RunSettings
from scheduling.service.schedule_worker import ScheduleWorker
from scheduling.storage import Storage
from scheduling.testing import SystemClock, configure_process_logs, open_storage
from simulation.engine.checkers import check_ledger
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.engine.server_crash import CRASH_MODES
from simulation.provider import acquire_server
from simulation.provider._autofailover import autofailover_formation
from simulation.provider._pgbouncer import pgbouncer_in_front
from simulation.provider._private import private_cluster
from simulation.provider._replica import replica_pair
from simulation.provider.templates import migrated_template
from simulation.scenarios.soak_faults import ScriptedFault, ServerFaults, run_with_faults
from simulation.worlds.service import (
    build_world,
    ceiling_env,
    definition,
    principal,
    seed_durable,
    world_settings,
)

SIM_START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
ZONES = (
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "America/Santiago",
    "Asia/Kathmandu",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Africa/Casablanca",
)
CEILINGS = TenantCeilings(
    max_run_timeout_seconds=7200,
    max_misfire_grace_seconds=7200,
    max_steps=100,
    max_model_calls=100,
    max_tool_calls=100,
    max_cost_per_run=Decimal(10),
    max_active_runs=1000,
    max_materializations_per_minute=10_000,
    max_daily_cost=Decimal(1_000_000),
    max_monthly_cost=Decimal(10_000_000),
)


WORKER_ROLE = "soak-worker"
WITNESS_SECONDS = 0.25


class ScaledClock:
    """Simulated time = ``sim_base + (wall - wall_base) * speed``; shared by processes
    that agree on the two bases. ``sleep`` sleeps ``seconds / speed`` of wall time."""

    def __init__(self, wall: Clock, wall_base: datetime, sim_base: datetime, speed: float) -> None:
        self._wall = wall
        self._wall_base = wall_base
        self._sim_base = sim_base
        self._speed = speed

    def now(self) -> datetime:
        return self._sim_base + (self._wall.now() - self._wall_base) * self._speed

    async def sleep(self, seconds: float) -> None:
        await self._wall.sleep(max(seconds, 0.0) / self._speed)


@dataclass(frozen=True)
class WorkerPlan:
    url: str
    name: str
    seed: int
    wall_base: str
    speed: float
    sim_end: str


def soak_settings(poll: float = 600.0) -> Settings:
    """The soak's configuration: the world's, with wide ceilings, a one-minute admission
    backoff and batches of 50."""
    return world_settings(
        **ceiling_env(CEILINGS),
        AGENT_SCHEDULE_ADMISSION_BACKOFF_SECONDS="60",
        AGENT_SCHEDULE_SCAN_BATCH="50",
        AGENT_SCHEDULE_FALLBACK_POLL_SECONDS=str(poll),
    )


def schedule_worker(storage: Storage, clock: Clock, ids: SeededIds, poll: float) -> ScheduleWorker:
    """The scheduler role's worker as production startup builds it."""
    settings = SchedulerSettings.of(soak_settings(poll))
    return build_scheduler(settings, clock=clock, ids=ids, storage=storage).worker


async def worker_process(plan: WorkerPlan) -> dict[str, Any]:
    """One soak process: a schedule worker loop and a run worker slot until sim_end.
    WARNING and worse go to stderr through the product's process handler, as a role's
    log does (``<UTC> LEVEL soak-worker@<name> logger: message``, a repeated failure
    once and then counted); the soak counts them."""
    configure_process_logs(WORKER_ROLE, plan.name, sys.stderr)
    storage = open_storage(plan.url, pool_size=4)
    clock = ScaledClock(
        SystemClock(), datetime.fromisoformat(plan.wall_base), SIM_START, plan.speed
    )
    ids = SeededIds(plan.seed).fork(plan.name)
    end = datetime.fromisoformat(plan.sim_end)
    schedules = schedule_worker(storage, clock, ids, poll=600.0)
    runs = build_run_worker(
        soak_settings(),
        None,
        clock=clock,
        ids=ids.fork("runs"),
        storage=storage,
        capacity=QueueCapacity(8, 1, 1),
        owner=plan.name,
        worker_settings=RunSettings(lease_seconds=7200, heartbeat_seconds=600, poll_seconds=300),
    ).worker
    stop = asyncio.Event()

    async def until_end() -> None:
        while clock.now() < end:
            await clock.sleep(600)
        stop.set()

    try:
        await asyncio.gather(until_end(), schedules.run(stop), runs.slot(stop))
    finally:
        await storage.close()
    return {
        "process": plan.name,
        "stopped_at": clock.now().isoformat(),
        "scheduler_metrics": schedules.metrics.summary(),
    }


def cadence_for(rng: random.Random, start: datetime, hours: float) -> dict[str, Any]:
    zone = rng.choice(ZONES)
    local = f"{rng.randrange(24):02d}:{rng.choice((0, 15, 30, 45)):02d}"
    kind = rng.choice(("DAILY", "DAILY", "DAILY", "WEEKLY", "MONTHLY", "ONCE"))
    if kind == "ONCE":
        at = start + timedelta(seconds=rng.randrange(60, int(hours * 3600)))
        return {"kind": "ONCE", "at": at.isoformat()}
    payload: dict[str, Any] = {"kind": kind, "local_time": local, "timezone": zone}
    if kind == "WEEKLY":
        payload["weekdays"] = sorted(rng.sample(range(1, 8), rng.randint(1, 4)))
    if kind == "MONTHLY":
        payload["days_of_month"] = sorted(rng.sample(range(1, 32), 3))
        payload["last_day"] = rng.random() < 0.5
    return payload


async def setup(url: str, count: int, seed: int, hours: float) -> dict[UUID, datetime]:
    who = principal("soak-owner")
    storage = open_storage(url, pool_size=2)
    try:
        await seed_durable(storage.as_role("trusted"), [who], at=SIM_START)
        service = build_world(storage, seed=seed, start=SIM_START).service
        rng = random.Random(seed)
        first: dict[UUID, datetime] = {}
        for i in range(count):
            result = await service.create(
                who,
                f"soak-{i}",
                definition(
                    title=f"soak {i}",
                    instruction="Soak. [script:succeed]",
                    cadence=cadence_for(rng, SIM_START, hours),
                    misfire_grace_seconds=3600,
                    run_timeout_seconds=3600,
                    max_consecutive_failures=1000,
                ),
            )
            assert result.schedule.next_fire_at is not None
            first[result.schedule.id] = result.schedule.next_fire_at
        return first
    finally:
        await storage.close()


async def quiet_pass(url: str, at: datetime, seed: int) -> int:
    """Decide everything due at ``at`` (no faults, one worker) until nothing is due."""
    storage = open_storage(url, pool_size=2)
    admin = storage.factory("trusted")
    clock = VirtualClock(at)
    worker = schedule_worker(storage, clock, SeededIds(seed).fork("quiet"), poll=600.0)
    decided = 0
    try:
        for _ in range(1000):
            # Queued runs left by the stop never finish here: complete them so the final
            # pass decides instants instead of skipping them as overlaps.
            async with admin.engine.begin() as conn:
                await conn.execute(
                    text(
                        "UPDATE runs SET status = 'COMPLETED', finished_at = :t,"
                        " lease_owner = NULL, lease_expires_at = NULL"
                        " WHERE status IN ('QUEUED', 'RUNNING')"
                    ),
                    {"t": at},
                )
            report = await worker.run_once()
            decided += len(report.results)
            if not report.scanned:
                return decided
        raise RuntimeError("the quiet pass did not converge")
    finally:
        await storage.close()


async def ledger_check(url: str, first: dict[UUID, datetime], end: datetime) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        occ = [dict(r) for r in await conn.fetch("SELECT * FROM schedule_occurrences")]
        runs = [dict(r) for r in await conn.fetch("SELECT * FROM runs")]
        sessions = [
            dict(r, metadata=json.loads(r["metadata"]))
            for r in await conn.fetch("SELECT * FROM sessions")
        ]
        schedules = {r["id"]: dict(r) for r in await conn.fetch("SELECT * FROM schedules")}
        revisions = {
            (r["schedule_id"], r["revision"]): json.loads(r["definition"])
            for r in await conn.fetch("SELECT * FROM schedule_revisions")
        }
        coalesced = [
            (r["schedule_id"], json.loads(r["payload"]))
            for r in await conn.fetch(
                "SELECT schedule_id, payload FROM process_events"
                " WHERE event_type = 'schedule.misfires_coalesced'"
            )
        ]
    finally:
        await conn.close()
    problems = [f"{v.invariant}: {v.message}" for v in check_ledger(occ, runs, sessions)]
    problems += lost_instants(first, occ, schedules, revisions, coalesced, end)
    dispositions: dict[str, int] = {}
    for row in occ:
        dispositions[row["disposition"]] = dispositions.get(row["disposition"], 0) + 1
    return {
        "occurrences": len(occ),
        "dispositions": dict(sorted(dispositions.items())),
        "runs": len(runs),
        "runs_completed": sum(r["status"] == "COMPLETED" for r in runs),
        "coalescing_events": len(coalesced),
        "coalesced_instants": sum(int(p["count"]) for _, p in coalesced),
        "problems": problems[:50],
        "problem_count": len(problems),
    }


def lost_instants(
    first: dict[UUID, datetime],
    occ: list[dict[str, Any]],
    schedules: dict[UUID, dict[str, Any]],
    revisions: dict[tuple[UUID, int], dict[str, Any]],
    coalesced: list[tuple[UUID, dict[str, Any]]],
    end: datetime,
) -> list[str]:
    """Every instant before the schedule's horizon decided exactly once."""
    problems: list[str] = []
    decided: dict[UUID, list[datetime]] = {sid: [] for sid in first}
    for row in occ:
        decided[row["schedule_id"]].append(row["nominal_fire_at"])
    for sid, payload in coalesced:
        # Every revision of a soak schedule has the same cadence (no updates).
        cadence = parse_cadence(revisions[(sid, 1)]["cadence"])
        lo = datetime.fromisoformat(payload["first_nominal_at"])
        hi = datetime.fromisoformat(payload["last_nominal_at"])
        walk = _walk(cadence, lo, hi)
        if len(walk) != int(payload["count"]):
            problems.append(f"{sid}: coalesced count {payload['count']} spans {len(walk)}")
        decided[sid] += walk
    for sid, start in first.items():
        row = schedules[sid]
        cadence = parse_cadence(revisions[(sid, 1)]["cadence"])
        mine = sorted(decided[sid])
        if len(mine) != len(set(mine)):
            problems.append(f"{sid}: an instant decided twice")
        if row["state"] == "ACTIVE":
            horizon = row["next_fire_at"]
            if horizon is None or horizon <= end:
                problems.append(f"{sid}: still due after the quiet pass ({horizon})")
                continue
            expected = _walk(cadence, start, horizon - timedelta(microseconds=1))
        else:
            expected = _walk(cadence, start, mine[-1]) if mine else []
        missing = sorted(set(expected) - set(mine))
        if missing:
            problems.append(f"{sid}: {len(missing)} instants lost, first {missing[0]}")
        extra = sorted(set(mine) - set(expected))
        if extra:
            problems.append(f"{sid}: decided instants not of its cadence: {extra[0]}")
    return problems


def _walk(cadence: Any, lo: datetime, hi: datetime) -> list[datetime]:
    out: list[datetime] = []
    current = next_after(cadence, lo - timedelta(microseconds=1))
    while current is not None and current <= hi:
        out.append(current)
        current = next_after(cadence, current)
    return out


@dataclass
class SoakDatabase:
    """Where the soak runs: ``url`` for the workers, the witness and the checks;
    ``admin_url`` for the fault supervisor (the server itself, behind a pooler); the
    server faults; and readers of the servers' (and the pooler's) logs."""

    url: str
    faults: ServerFaults | None = None
    admin_url: str | None = None
    logs: dict[str, Callable[[], str]] = field(default_factory=dict)


def _database(args: argparse.Namespace, stack: ExitStack) -> SoakDatabase:
    """The soak's database and server faults: a pg_auto_failover formation for
    ``--autofailover`` (multi-host URL; switchover, failover and a lost primary node
    through the manager at 1/4, 1/2 and 3/4 of the soak), a primary with a synchronous
    standby (multi-host URL) for ``--failover``, a private durable cluster for
    ``--server-crash-every`` or ``--private-server``; else ``--url`` or a clone on the
    provider's server. ``--pgbouncer`` puts a pgbouncer in front of the single server.
    Every server is stopped and removed when ``stack`` closes."""
    if args.autofailover:
        formation = stack.enter_context(autofailover_formation())
        primary = formation.primary_server()
        database = primary.create_database(template=migrated_template(primary))

        def lose_primary_node() -> None:
            lost = formation.crash_primary()
            formation.restart(lost)  # it rejoins as a secondary (pg_rewind)

        third = args.seconds / 4
        scripted = (
            ScriptedFault(third, "switchover", formation.switchover),
            ScriptedFault(2 * third, "manager_failover", formation.failover),
            ScriptedFault(3 * third, "node_crash", lose_primary_node),
        )

        def node_log(name: str) -> Callable[[], str]:
            return lambda: formation.postgres_logs()[name]

        logs = {f"postgres {n.name}": node_log(n.name) for n in formation.nodes}
        return SoakDatabase(
            formation.multi_host_url(database), ServerFaults(scripted=scripted), logs=logs
        )
    if args.failover:
        pair = stack.enter_context(replica_pair(synchronous=True))
        database = pair.primary.create_database(template=migrated_template(pair.primary))

        def fail_over() -> None:
            pair.kill_primary()
            pair.promote()

        return SoakDatabase(
            pair.multi_host_url(database),
            ServerFaults(fail_over=fail_over, failover_at=args.seconds / 2),
            logs={
                "postgres primary": pair.primary_cluster.log_path.read_text,
                "postgres standby": pair.standby_cluster.log_path.read_text,
            },
        )
    if args.server_crash_every > 0 or args.private_server:
        private = stack.enter_context(private_cluster(durable=True))
        url = private.server.create_database(template=migrated_template(private.server))
        # Alternate SIGKILL of the postmaster and PostgreSQL's immediate shutdown.
        modes = itertools.cycle(CRASH_MODES)

        def crash() -> None:
            private.crash(next(modes))
            private.restart()

        faults = (
            ServerFaults(crash=crash, crash_every=args.server_crash_every)
            if args.server_crash_every > 0
            else None
        )
        return _pooled(args, stack, SoakDatabase(url, faults, logs={"postgres": private.log_text}))
    if args.url is not None:
        return _pooled(args, stack, SoakDatabase(str(args.url)))
    server = stack.enter_context(contextlib.closing(acquire_server()))
    url = server.create_database(template=migrated_template(server))
    stack.callback(server.drop_database, url)
    return _pooled(args, stack, SoakDatabase(url))


def _pooled(args: argparse.Namespace, stack: ExitStack, db: SoakDatabase) -> SoakDatabase:
    """``db`` reached through a pgbouncer in ``--pgbouncer`` mode (the supervisor keeps
    the direct URL: it terminates the server's backends, not the pooler's clients)."""
    if args.pgbouncer is None:
        return db
    parts = urlsplit(db.url)
    bouncer = stack.enter_context(
        pgbouncer_in_front(
            parts.hostname or "127.0.0.1",
            parts.port or 5432,
            pool_mode=args.pgbouncer,
            users=[parts.username or "postgres"],
        )
    )
    db.admin_url = db.url
    db.url = bouncer.url_for(db.url)
    db.logs["pgbouncer"] = bouncer.log_text
    return db


class CommitWitness:
    """Reads every occurrence and run id through ``url`` every ``WITNESS_SECONDS``
    until stopped, reconnecting across server faults: an id it saw was committed and
    visible (with synchronous replication: on the standby too), so it must survive."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.occurrences: set[UUID] = set()
        self.runs: set[UUID] = set()
        self.reads = 0
        self.failed_reads = 0

    async def run(self, stop: asyncio.Event) -> None:
        conn: Any = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = await asyncpg.connect(self.url, statement_cache_size=0, timeout=5)
                async with conn.transaction(readonly=True):
                    occ = await conn.fetch("SELECT id FROM schedule_occurrences")
                    runs = await conn.fetch("SELECT id FROM runs")
                self.occurrences.update(r["id"] for r in occ)
                self.runs.update(r["id"] for r in runs)
                self.reads += 1
            except (
                OSError,
                TimeoutError,
                asyncpg.PostgresError,
                asyncpg.InterfaceError,
                asyncpg.InternalClientError,  # a connection broken mid-transaction
            ):
                self.failed_reads += 1
                if conn is not None:
                    conn.terminate()
                conn = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WITNESS_SECONDS)
        if conn is not None:
            conn.terminate()

    async def lost(self, url: str) -> list[str]:
        conn = await asyncpg.connect(url, statement_cache_size=0)
        try:
            occ = {r["id"] for r in await conn.fetch("SELECT id FROM schedule_occurrences")}
            runs = {r["id"] for r in await conn.fetch("SELECT id FROM runs")}
        finally:
            await conn.close()
        problems = [f"witnessed occurrence {i} is gone" for i in sorted(self.occurrences - occ)]
        problems += [f"witnessed run {i} is gone" for i in sorted(self.runs - runs)]
        return problems

    def summary(self) -> dict[str, int]:
        return {
            "reads": self.reads,
            "failed_reads": self.failed_reads,
            "occurrences_seen": len(self.occurrences),
            "runs_seen": len(self.runs),
        }


_PG_LINE = re.compile(r"\b(ERROR|FATAL|PANIC):\s+(.*)")
# A line of the product's text log (scheduling.logs.TextFormatter): time, level,
# role@instance, logger, message; a repeat summary ends with its count.
_PROCESS_LINE = re.compile(r"^\S+Z (ERROR|CRITICAL|WARNING) \S+@\S+ (\S+): (.*)")
_REPEATED = re.compile(r" \[repeated (\d+) times? from \S+ to \S+\]$")
_PGBOUNCER_LINE = re.compile(r"\b(ERROR|WARNING|FATAL)\s+(.*)")
_VARYING = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|0x[0-9a-f]+|\d+"
)


def _category(text: str, limit: int = 100) -> str:
    """A log message with its ids and numbers replaced, cut to ``limit`` characters."""
    return _VARYING.sub("N", text.strip())[:limit]


def _process_record(line: str) -> tuple[str, str, int | None] | None:
    """A worker's WARNING-or-worse line: its level, its category and, for a repeat
    summary, how many records it stands for; None for any other line."""
    match = _PROCESS_LINE.match(line)
    if match is None:
        return None
    level, logger, message = match.groups()
    repeated = _REPEATED.search(message)
    if repeated is not None:
        message = message[: repeated.start()]
    count = None if repeated is None else int(repeated.group(1))
    return level, f"{level} {logger}: {_category(message)}", count


def error_lines(
    process_logs: dict[str, str], server_logs: dict[str, str]
) -> dict[str, dict[str, int]]:
    """ERROR (and worse) records by category: ``processes`` (the workers' stderr, also
    WARNING under ``process_warnings``; a repeat summary counts the records it stands
    for, so these count what happened, not what was written), ``process_log`` (the
    lines written and how many of them were summaries) and one entry per server log."""
    out: dict[str, dict[str, int]] = {"processes": {}, "process_warnings": {}}
    written = summaries = 0
    for log in process_logs.values():
        for line in log.splitlines():
            record = _process_record(line)
            if record is None:
                continue
            level, cat, count = record
            written += 1
            summaries += count is not None
            key = "process_warnings" if level == "WARNING" else "processes"
            out[key][cat] = out[key].get(cat, 0) + (count or 1)
    out["process_log"] = {"lines": written, "repeat_summaries": summaries}
    for name, log in server_logs.items():
        counts: dict[str, int] = {}
        pattern = _PGBOUNCER_LINE if name == "pgbouncer" else _PG_LINE
        for line in log.splitlines():
            match = pattern.search(line)
            if match is not None and (name == "pgbouncer" or match.group(1) != "FATAL"):
                cat = f"{match.group(1)} {_category(match.group(2))}"
                counts[cat] = counts.get(cat, 0) + 1
        out[name] = dict(sorted(counts.items(), key=lambda kv: -kv[1]))
    return out


def error_examples(process_logs: dict[str, str], lines: int = 6) -> dict[str, list[str]]:
    """The first ERROR (or CRITICAL) line of each category in the workers' stderr, with
    the lines that follow it (its traceback)."""
    examples: dict[str, list[str]] = {}
    for log in process_logs.values():
        rows = log.splitlines()
        for i, line in enumerate(rows):
            record = _process_record(line)
            if record is None or record[0] == "WARNING":
                continue
            examples.setdefault(record[1], rows[i : i + lines])
    return examples


def _keep_logs(keep: Path, logs: dict[str, str]) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    for name, log in logs.items():
        (keep / f"{name.replace(' ', '-')}.log").write_text(log, encoding="utf-8")


def _process_logs(logdir: Path) -> dict[str, str]:
    return {
        p.stem: p.read_text(encoding="utf-8", errors="replace")
        for p in sorted(logdir.glob("*.stderr"))
    }


def _read_logs(readers: dict[str, Callable[[], str]]) -> dict[str, str]:
    texts: dict[str, str] = {}
    for name, read in readers.items():
        try:
            texts[name] = read()
        except OSError as exc:
            texts[name] = f"(unreadable: {exc})"
    return texts


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    with ExitStack() as stack:
        db = _database(args, stack)
        url = db.url
        logdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-logs-")))
        hours = args.seconds * args.speed / 3600
        first = await setup(url, args.schedules, args.seed, hours)
        wall = SystemClock()
        wall_base = wall.now()
        sim_end = SIM_START + timedelta(seconds=args.seconds * args.speed)

        async def spawn(name: str) -> asyncio.subprocess.Process:
            plan = WorkerPlan(
                url, name, args.seed, wall_base.isoformat(), args.speed, sim_end.isoformat()
            )
            with (logdir / f"{name}.stderr").open("ab") as stderr:
                return await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "simulation.scenarios.soak",
                    "--worker",
                    json.dumps(plan.__dict__),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=stderr,
                )

        # Count only what the soak itself logs (a formation's set-up writes ERROR lines).
        log_start = {name: len(text) for name, text in _read_logs(db.logs).items()}
        witness = CommitWitness(url)
        stop_witness = asyncio.Event()
        watching = asyncio.create_task(witness.run(stop_witness))
        try:
            faults = await run_with_faults(
                url=url,
                names=[f"soak-{i}" for i in range(args.processes)],
                spawn=spawn,
                wall_seconds=args.seconds,
                kill_every=args.kill_every,
                terminate_every=args.terminate_every,
                seed=args.seed,
                server=db.faults,
                admin_url=db.admin_url,
            )
        finally:
            stop_witness.set()
            await watching
        outputs = [(out, None) for out in faults.outputs]
        codes = faults.exit_codes
        decided = await quiet_pass(url, sim_end, args.seed)
        report = await ledger_check(url, first, sim_end)
        lost = await witness.lost(url)
        report["problems"] = (report["problems"] + lost)[:50]
        report["problem_count"] += len(lost)
        process_logs = _process_logs(logdir)
        if args.keep_logs:
            _keep_logs(Path(args.keep_logs), {**process_logs, **_read_logs(db.logs)})
        report.update(
            processes=args.processes,
            process_exit_codes=codes,
            process_reports=[json.loads(o[0] or b"{}") for o in outputs],
            schedules=args.schedules,
            simulated_span=str(sim_end - SIM_START),
            wall_seconds=args.seconds,
            speed=args.speed,
            seed=args.seed,
            decided_by_quiet_pass=decided,
            lag_seconds=_lag_percentiles(outputs),
            commit_witness=witness.summary(),
            error_lines=error_lines(
                process_logs,
                {k: v[log_start.get(k, 0) :] for k, v in _read_logs(db.logs).items()},
            ),
            error_examples=error_examples(process_logs),
            command=_command(args),
            **faults.summary(),
        )
        if any(codes):
            report["problem_count"] += 1
            report["problems"].append(f"a worker process failed: exit codes {codes}")
        return report


def _command(args: argparse.Namespace) -> str:
    return (
        f"python -m simulation.scenarios.soak --processes {args.processes} --schedules "
        f"{args.schedules} --seconds {args.seconds} --speed {args.speed} --seed {args.seed}"
        f" --kill-every {args.kill_every} --terminate-every {args.terminate_every}"
        + (f" --server-crash-every {args.server_crash_every}" if args.server_crash_every else "")
        + (" --failover" if args.failover else "")
        + (" --autofailover" if args.autofailover else "")
        + (" --private-server" if args.private_server else "")
        + (f" --pgbouncer {args.pgbouncer}" if args.pgbouncer else "")
    )


def _lag_percentiles(outputs: list[tuple[bytes, None]]) -> dict[str, float] | None:
    """The worst p50/p95/p99 due-to-decided lag over the surviving processes."""
    cuts: dict[str, float] = {}
    for out, _ in outputs:
        try:
            lag = json.loads(out or b"{}").get("scheduler_metrics", {}).get("lag_seconds")
        except ValueError:
            continue
        for key, value in (lag or {}).items():
            cuts[key] = max(cuts.get(key, 0.0), float(value))
    return cuts or None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulation.scenarios.soak", description=__doc__
    )
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--schedules", type=int, default=120)
    parser.add_argument("--seconds", type=float, default=120.0, help="wall-clock seconds")
    parser.add_argument("--speed", type=float, default=3600.0, help="simulated s per wall s")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--url", default=None, help="an existing migrated database")
    parser.add_argument(
        "--kill-every",
        type=float,
        default=0.0,
        help="mean wall seconds between SIGKILLs of a worker process (restarted at once); 0: none",
    )
    parser.add_argument(
        "--terminate-every",
        type=float,
        default=0.0,
        help="mean wall seconds between pg_terminate_backend of a worker connection; 0: none",
    )
    parser.add_argument(
        "--server-crash-every",
        type=float,
        default=0.0,
        help="crash the PostgreSQL server itself every N wall seconds (alternately SIGKILL of"
        " the postmaster and immediate shutdown) and restart it, on a private durable"
        " cluster; 0: never",
    )
    parser.add_argument(
        "--failover",
        action="store_true",
        help="run on a primary with a synchronous standby (multi-host URL); halfway through,"
        " kill the primary and promote the standby",
    )
    parser.add_argument(
        "--autofailover",
        action="store_true",
        help="run on a pg_auto_failover formation (monitor, primary, synchronous secondary;"
        " multi-host URL); at 1/4, 1/2 and 3/4 of the soak: pg_autoctl perform switchover,"
        " pg_autoctl perform failover, and the primary node SIGKILLed whole (the monitor"
        " promotes the secondary; the lost node is restarted and rejoins)",
    )
    parser.add_argument(
        "--private-server",
        action="store_true",
        help="run on a private durable cluster without server faults (its log is read)",
    )
    parser.add_argument(
        "--pgbouncer",
        choices=("session", "transaction"),
        default=None,
        help="put a pgbouncer in this pool mode in front of the server; the workers, the"
        " witness and the checks go through it (not with --failover/--autofailover)",
    )
    parser.add_argument(
        "--keep-logs",
        default=None,
        help="copy the workers' stderr and the servers' logs into this directory",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    own_servers = (
        args.server_crash_every > 0 or args.failover or args.autofailover or args.private_server
    )
    if own_servers and args.url is not None:
        parser.error(
            "--server-crash-every, --failover, --autofailover and --private-server start"
            " their own servers; drop --url"
        )
    server_modes = [
        args.server_crash_every > 0 or args.private_server,
        args.failover,
        args.autofailover,
    ]
    if sum(server_modes) > 1:
        parser.error(
            "--server-crash-every (or --private-server), --failover and --autofailover"
            " are separate soaks"
        )
    if args.pgbouncer and (args.failover or args.autofailover):
        parser.error("--pgbouncer fronts one server; not with --failover or --autofailover")
    if args.worker is not None:
        result = asyncio.run(worker_process(WorkerPlan(**json.loads(args.worker))))
        print(json.dumps(result))
        return 0
    report = asyncio.run(soak(args))
    print(json.dumps(report, indent=2, default=str))
    if report["problem_count"]:
        return 1
    faulty = (
        args.kill_every > 0
        or args.terminate_every > 0
        or args.server_crash_every > 0
        or args.failover
        or args.autofailover
    )
    # Faults asked for but none landed inside a transaction: not covered (exit 3).
    return 3 if faulty and report["fault_coverage"] != "covered" else 0


if __name__ == "__main__":
    raise SystemExit(main())
