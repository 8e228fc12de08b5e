"""Seeding and worker processes for bench_materialize.py (not a benchmark itself).

A world is one fresh database from the migrated template with ``tenants`` principals
(one per tenant), one daily schedule created through the schedule service for each,
then cloned in SQL (``generate_series``) to ``schedules`` due schedules, all due at the
same nominal instant. Every worker process builds its schedule worker through
``scheduling.bootstrap.build_scheduler`` (development settings, the PostgreSQL
admission controller, the durable directories, ceilings high enough that admission
admits everything) on a clock shifted so that the real start of the drain is
``nominal + 30 s``; the due-to-decided lag is therefore real decision latency.

Statements and transactions are counted inside each worker process without slowing the
path production runs: an asyncpg query logger on every pooled connection sees what the
driver sends itself (the hot path's ``Transaction.fetch`` statements, ADR 1740, and
BEGIN/COMMIT/ROLLBACK, which are round trips but not statements), and the engine's
``before_execute`` and ``begin`` events see what SQLAlchemy sends (through asyncpg
prepared statements, which the query logger does not see). No ``before_cursor_execute``
listener is installed: it would make every hot-path statement take two greenlet hops
(``Transaction.fetch`` serves statement observers such as the gates' instruments). New
server sessions (connections) and commits are read from ``pg_stat_database`` around the
drain.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import asyncpg
from backend_cpu import BackendPids
from drain_replay import Recorded, Recorder
from sqlalchemy import event

from scheduling.bootstrap import SchedulerSettings, build_scheduler
from scheduling.cli.role_loop import run_role
from scheduling.config import Settings
from scheduling.service.materializer import MaterializeStatus
from scheduling.testing import (
    PostgresUnitOfWork,
    PostgresUnitOfWorkFactory,
    RandomIds,
    SystemClock,
    storage_over,
    tenant_usage,
)
from simulation.worlds.service import (
    START,
    build_world,
    definition,
    principal,
    seed_durable,
)

OFFSET = timedelta(seconds=30)
IN_FLIGHT = 4
"""The worker's concurrency (throughput mode: materializations in flight, each slot a
connection lane); a replay at this many connections matches it (ADR 2730)."""
CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})
HUGE = 10**9


class ShiftedClock:
    """The system clock moved back by a fixed delta (so the drain starts at
    ``nominal + 30 s`` of a schedule created in the harness's virtual past)."""

    def __init__(self, delta: timedelta) -> None:
        self._system = SystemClock()
        self._delta = delta

    def now(self) -> datetime:
        return self._system.now() - self._delta

    async def sleep(self, seconds: float) -> None:
        await self._system.sleep(seconds)


def settings_for(url: str, **extra: Any) -> Settings:
    """Development settings for the scheduler over the admin login (SET LOCAL ROLE)."""
    ceilings = {
        "max_run_timeout_seconds": 3600,
        "max_misfire_grace_seconds": 7200,
        "max_steps": 100,
        "max_model_calls": 100,
        "max_tool_calls": 100,
        "max_cost_per_run": Decimal(10),
        "max_active_runs": HUGE,
        "max_materializations_per_minute": HUGE,
        "max_daily_cost": Decimal(HUGE),
        "max_monthly_cost": Decimal(HUGE),
    }
    return Settings.model_validate(
        {
            "api_flag": "1",
            "worker_flag": "1",
            "database_url": url,
            "ceilings": ceilings,
            "worker_concurrency": IN_FLIGHT,
            **extra,
        }
    )


async def seed(url: str, schedules: int, tenants: int) -> datetime:
    """Create the world; return the nominal instant every schedule is due at."""
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=2)
    try:
        who = [principal(f"bench-{i}", tenant_id=f"tenant-{i}") for i in range(tenants)]
        await seed_durable(admin, who, at=START)
        world = build_world(storage_over(admin), start=START)
        fire: datetime | None = None
        for i, p in enumerate(who):
            created = await world.service.create(p, f"bench-{i}", definition())
            fire = created.schedule.next_fire_at
        assert fire is not None
        per_tenant = max(schedules // tenants - 1, 0)
        async with admin.engine.begin() as conn:
            await conn.exec_driver_sql(CLONE, (per_tenant,))
        return fire
    finally:
        await admin.dispose()


CLONE = """
WITH src AS (
    SELECT s.*, r.definition, r.created_by_principal_id, r.created_at AS revision_at
    FROM schedules s JOIN schedule_revisions r
      ON r.schedule_id = s.id AND r.revision = s.current_revision
), clones AS (
    SELECT gen_random_uuid() AS nid, src.* FROM src, generate_series(1, $1::int)
), added AS (
    INSERT INTO schedules (id, tenant_id, principal_id, state, pause_reason,
                           current_revision, next_fire_at, consecutive_failures,
                           created_at, updated_at)
    SELECT nid, tenant_id, principal_id, state, pause_reason, current_revision,
           next_fire_at, consecutive_failures, created_at, updated_at FROM clones
)
INSERT INTO schedule_revisions (schedule_id, revision, definition,
                                created_by_principal_id, created_at)
SELECT nid, current_revision, definition, created_by_principal_id, revision_at FROM clones
"""


async def server_counters(dsn: str) -> dict[str, int]:
    """Sessions opened and transactions committed in this database so far."""
    conn = await asyncpg.connect(dsn)
    try:
        await asyncio.sleep(1.2)  # other backends flush their statistics within 1 s
        row = await conn.fetchrow(
            "SELECT sessions, xact_commit FROM pg_stat_database WHERE datname = current_database()"
        )
        assert row is not None
        return {"sessions": int(row["sessions"]), "xact_commit": int(row["xact_commit"])}
    finally:
        await conn.close()


@dataclass
class DrainResult:
    decided: int
    seconds: float
    cpu_seconds: float
    """Client CPU (user + system) of the worker process during the drain."""
    system_seconds: float
    """The kernel's part of ``cpu_seconds`` (socket sends and receives, epoll)."""
    server_cpu_seconds: float | None
    """CPU of the server backends this worker's connections used during the drain
    (``backend_cpu``; ``None`` when the server's processes are not readable here)."""
    statements: dict[str, int]
    control: dict[str, int]
    """BEGIN / COMMIT / ROLLBACK sent by the driver (round trips, not statements)."""
    transactions: int
    round_trips: int
    """Messages sent and answered: each query-logger record and each SQLAlchemy execute."""
    lags: list[float]
    rss_kib: int
    passes: int
    not_due: int
    rss_at: dict[int, int]
    """RSS (KiB) when the worker's decisions first reached each checkpoint."""
    captured: list[Recorded] = field(default_factory=list)
    """With ``CAPTURE``: what the driver sent itself, for ``drain_replay``."""


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def drain(
    url: str, nominal: datetime, real_start: float, extra: dict[str, Any]
) -> DrainResult:
    """Build one scheduler through the composition root and pass until nothing is due."""
    # now() == nominal + OFFSET at the monotonic instant ``real_start`` (shared by all
    # worker processes: CLOCK_MONOTONIC is system-wide).
    delta = (
        SystemClock().now() - (nominal + OFFSET) - timedelta(seconds=time.monotonic() - real_start)
    )
    clock = ShiftedClock(delta)
    settings = dict(extra)
    counted = bool(settings.pop(COUNTED, True))
    recorder = Recorder() if settings.pop(CAPTURE, False) else None
    role = build_scheduler(
        SchedulerSettings.of(settings_for(url, **settings)), clock=clock, ids=RandomIds()
    )
    uow: Any = role.uow
    # Not a counter: the pool's ``connect`` event fires once per new connection, so it
    # costs nothing per decision; it records each backend so the server's CPU for this
    # drain can be read (ADR 2670).
    backends = BackendPids()
    event.listen(uow.engine.sync_engine, "connect", backends.on_connect)
    statements: Counter[str] = Counter()
    control: Counter[str] = Counter()
    transactions = round_trips = 0
    logged: set[int] = set()

    def verb(statement: str) -> str:
        return statement.split(None, 1)[0].upper().rstrip(";")

    def on_execute(conn: Any, clauseelement: Any, *_: Any) -> None:
        nonlocal round_trips
        round_trips += 1
        statements[verb(str(clauseelement))] += 1

    def on_query(record: Any) -> None:
        # One record is one round trip; a simple query may carry several statements
        # (the unit of work's ``BEGIN; SELECT set_config(...)``, ADR 1750).
        nonlocal round_trips
        round_trips += 1
        parts = [part for part in record.query.split(";") if part.strip()]
        for part in parts if not record.args else [record.query]:
            name = verb(part)
            (control if name in CONTROL else statements)[name] += 1

    def on_checkout(dbapi_connection: Any, *_: Any) -> None:
        driver = dbapi_connection.driver_connection
        if id(driver) not in logged:
            logged.add(id(driver))
            driver.add_query_logger(on_query)

    def on_begin(*_: Any) -> None:
        nonlocal transactions
        transactions += 1

    if recorder is not None:

        def on_capture(dbapi_connection: Any, *_: Any) -> None:
            driver = dbapi_connection.driver_connection
            if id(driver) not in logged:
                logged.add(id(driver))
                driver.add_query_logger(recorder.logger(id(driver)))

        event.listen(uow.engine.sync_engine, "checkout", on_capture)
    elif counted:
        # The counters cost the client CPU (a query-logger record per round trip, and a
        # ``begin`` listener makes the unit of work begin SQLAlchemy's logical
        # transaction, ADR 2540), so the bench times drains run without them.
        event.listen(uow.engine.sync_engine, "before_execute", on_execute)
        event.listen(uow.engine.sync_engine, "begin", on_begin)
        event.listen(uow.engine.sync_engine, "checkout", on_checkout)
    worker = role.worker
    await asyncio.sleep(max(0.0, real_start - time.monotonic()))  # the start barrier
    started = time.perf_counter()
    cpu_started = time.process_time()
    system_started = os.times().system
    server_started = backends.cpu_seconds()
    passes = not_due = 0
    rss_at: dict[int, int] = {}
    checkpoints = [1_000, 10_000, 100_000]
    try:
        while True:
            report = await worker.run_once()
            passes += 1
            not_due += report.count(MaterializeStatus.NOT_DUE)
            decided = sum(worker.metrics.dispositions.values())
            while checkpoints and decided >= checkpoints[0]:
                rss_at[checkpoints.pop(0)] = _rss_kib()
            if not report.scanned:
                break
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        system_seconds = os.times().system - system_started
        server_now = backends.cpu_seconds()  # before the pool closes its connections
        server_seconds = (
            None if server_now is None or server_started is None else server_now - server_started
        )
    finally:
        await uow.dispose()
    gc.collect()
    metrics = worker.metrics
    return DrainResult(
        decided=sum(metrics.dispositions.values()),
        seconds=seconds,
        cpu_seconds=cpu_seconds,
        system_seconds=system_seconds,
        server_cpu_seconds=server_seconds,
        statements=dict(statements),
        control=dict(control),
        transactions=transactions,
        round_trips=round_trips,
        lags=[lag - OFFSET.total_seconds() for lag in metrics.lags],
        rss_kib=_rss_kib(),
        passes=passes,
        not_due=not_due,
        rss_at=rss_at,
        captured=[] if recorder is None else recorder.records,
    )


COUNTED = "counted"
"""Key of ``extra``: ``False`` runs the drain without its statement and round-trip
counters (default ``True``), so its client CPU is the role's own."""

CAPTURE = "capture"
"""Key of ``extra``: ``True`` records what the driver sends (text and arguments) for a
replay (``drain_replay``; ADR 2730) instead of counting it. A capturing drain is not a
timed one: its logger costs client CPU."""

EVENT_LOOP = "event_loop"
"""Key of ``extra`` naming the drain process's event loop: ``role`` (the default, the
production roles' loop: uvloop where it imports, ADR 2640), ``asyncio`` or ``uvloop``
(an A/B, ADR 2440; not a setting)."""


def drain_process(args: tuple[str, datetime, float, dict[str, Any]]) -> DrainResult:
    """Entry of one worker process (multiprocessing)."""
    url, nominal, real_start, extra = args
    extra = dict(extra)
    loop = extra.pop(EVENT_LOOP, "role")
    if loop == "role":
        return run_role(drain(url, nominal, real_start, extra))
    if loop == "uvloop":
        uvloop = importlib.import_module("uvloop")  # named explicitly: fail if missing

        result: DrainResult = uvloop.run(drain(url, nominal, real_start, extra))
        return result
    if loop != "asyncio":
        raise ValueError(f"unknown event loop {loop!r}")
    return asyncio.run(drain(url, nominal, real_start, extra))


HISTORY = """
INSERT INTO runs (id, tenant_id, principal_id, session_id, agent_id, agent_version,
    policy_profile, status, priority, scheduled_for, requested_scopes, limits, created_at,
    updated_at, fencing_token, usage, cost, metadata, finished_at)
SELECT gen_random_uuid(), 'tenant-0', 'bench-0', gen_random_uuid(), gen_random_uuid(), 'v1',
    'default', 'COMPLETED', 10, $2::timestamptz, '{}', '{"max_cost": "2"}',
    $2::timestamptz, $2::timestamptz, 1, '{}', 1.5,
    jsonb_build_object('schedule_id', gen_random_uuid()), $2::timestamptz
FROM generate_series(1, $1::int)
"""


async def admission_cost(url: str, history: int, now: datetime, reads: int) -> dict[str, Any]:
    """Median time of the admission usage read (inside a scheduler-role transaction)
    with ``history`` finished scheduled runs older than every window in the tenant."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET session_replication_role = replica")  # bulk: skip FKs
        await conn.execute(HISTORY, history, now - timedelta(days=400))
        await conn.execute("ANALYZE runs")
    finally:
        await conn.close()
    factory = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    scheduler = storage_over(factory).factory("scheduler")
    samples: list[float] = []
    try:
        async with scheduler.begin() as uow:
            assert isinstance(uow, PostgresUnitOfWork)
            for _ in range(reads):
                started = time.perf_counter()
                await tenant_usage(uow, "tenant-0", now)
                samples.append(time.perf_counter() - started)
    finally:
        await factory.dispose()
    samples.sort()
    return {"history": history, "median_ms": round(samples[len(samples) // 2] * 1000, 4)}
