"""Logs and connections an operator can attribute through server crashes (issue 25
item 3, ADRs 2270-2271): real ``scheduling scheduler`` and ``scheduling run-worker``
processes on their own least-privilege logins against a private durable cluster that is
crashed twice (SIGKILL of the postmaster, then PostgreSQL's immediate shutdown) and
restarted while one-time schedules fall due.

While they run, ``pg_stat_activity`` names each process's connections
``<role>@<instance id>`` (the scheduler's instance id configured, the run worker's the
default ``<hostname>-<pid>``). Their stderr: every log line starts with a UTC ISO-8601
timestamp with its zone, the level, ``<process role>@<instance id>`` and the logger;
the failures of an outage are written once and then counted (``repeated N times``)
instead of once per attempt; the test of the test is the same run with
``SCHEDULING_TEST_REPEAT_WINDOW=0.001`` (nothing collapsed), which fails.
``SCHEDULING_LOG_EXCERPT=path`` writes the two logs there (the excerpt in
docs/operations/deployment.md)."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import socket
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from tests.integration.test_cli_ops import WHO, production_env, sql, start, terminate

from scheduling import bootstrap as b
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.config import Settings
from scheduling.instance import default_instance_id
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.provider.templates import migrated_template
from simulation.worlds.service import definition, seed_durable

pytestmark = pytest.mark.postgres

LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (?P<level>[A-Z]+)"
    r" (?P<who>[a-z-]+@[A-Za-z0-9._-]+) (?P<logger>[\w.]+): "
)
SCHEDULER_ID = "sched-a"
OUTAGE_SECONDS = 4.0


async def logins(url: str) -> tuple[str, str]:
    """(scheduler login URL, run-worker login URL) on the private cluster."""
    password = secrets.token_hex(12)
    made = []
    for group, name in ((role_names().scheduler, "h_sched"), (role_names().run_worker, "h_run")):
        await sql(url, f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE {group}")
        login = make_url(url).set(username=name, password=password)
        made.append(login.render_as_string(hide_password=False))
    return made[0], made[1]


async def schedule_due_soon(url: str, env: dict[str, str], count: int) -> None:
    """``count`` one-time schedules due 1..count*2 s from now (database clock)."""
    db_now = (await sql(url, "SELECT now() AS t"))[0]["t"]
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    await seed_durable(admin, [WHO], at=db_now - timedelta(minutes=5))
    await admin.dispose()
    api = b.build_api(
        Settings.from_env(env), clock=VirtualClock(db_now - timedelta(seconds=5)), ids=SeededIds(3)
    )
    try:
        for i in range(count):
            at = (db_now + timedelta(seconds=1 + 2 * i)).isoformat()
            await api.service.create(
                WHO, f"crash-{i}", definition(cadence={"kind": "ONCE", "at": at})
            )
    finally:
        await api.close()


async def application_names(url: str) -> set[str]:
    rows = await sql(url, "SELECT application_name AS n FROM pg_stat_activity")
    return {str(r["n"]) for r in rows}


async def outage(cluster: PrivateCluster, how: str, seconds: float) -> None:
    cluster.crash(how)
    await asyncio.sleep(seconds)
    cluster.restart()


def keep(logs: str) -> None:
    """Write both logs to ``$SCHEDULING_LOG_EXCERPT`` when set (a harness knob)."""
    path = os.environ.get("SCHEDULING_LOG_EXCERPT")
    if path:
        Path(path).write_text(logs, encoding="utf-8")


def log_lines(text: str) -> list[re.Match[str]]:
    return [m for line in text.splitlines() if (m := LINE.match(line))]


async def test_crashes_leave_attributable_logs_and_connections() -> None:
    with private_cluster(durable=True) as cluster:
        url = cluster.server.create_database(template=migrated_template(cluster.server))
        scheduler_url, run_url = await logins(url)
        env = production_env(url, scheduler_url, run_url)
        env.update(
            {
                "AGENT_SCHEDULE_FALLBACK_POLL_SECONDS": "1",
                "AGENT_SCHEDULE_LOG_REPEAT_WINDOW_SECONDS": os.environ.get(
                    "SCHEDULING_TEST_REPEAT_WINDOW", "5"
                ),
            }
        )
        await schedule_due_soon(url, env, 12)
        scheduler = start("scheduler", env={**env, "AGENT_SCHEDULE_INSTANCE_ID": SCHEDULER_ID})
        worker = start("run-worker", "--class", "async", env=env)
        worker_id = default_instance_id(socket.gethostname(), worker.pid)
        try:
            deadline = time.monotonic() + 15
            expected = {f"scheduler@{SCHEDULER_ID}", f"run_worker@{worker_id}"}
            names = await application_names(url)
            while not expected <= names and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                names = await application_names(url)
            await asyncio.sleep(2)
            await outage(cluster, "kill", OUTAGE_SECONDS)
            await asyncio.sleep(4)
            await outage(cluster, "immediate", OUTAGE_SECONDS)
            await asyncio.sleep(6)
            after = await application_names(url)
        finally:
            s_code, _, s_err = terminate(scheduler)
            w_code, _, w_err = terminate(worker)
        keep(f"# scheduler\n{s_err}\n# run-worker\n{w_err}")
        occurrences = await sql(url, "SELECT count(*) AS n FROM schedule_occurrences")

    assert (s_code, w_code) == (0, 0), (s_err, w_err)
    assert expected <= names, names
    assert expected <= after, after  # the pools' new connections are named too
    assert occurrences[0]["n"] >= 1
    for err, who in ((s_err, f"scheduler@{SCHEDULER_ID}"), (w_err, f"run-worker@{worker_id}")):
        lines = log_lines(err)
        assert lines, err
        assert {m["who"] for m in lines} == {who}, err
        # Every line of the log is a log line or part of a traceback under one.
        for line in err.splitlines():
            assert LINE.match(line) or not line[:4].isdigit(), line
        # An outage is written once per kind, then counted, not once per attempt: per
        # (logger, message with its numbers blanked) at most two lines written in full
        # per outage (and one to spare), and at most one traceback per kind.
        full: Counter[tuple[str, str]] = Counter()
        for m in lines:
            if m["level"] in ("WARNING", "ERROR") and "[repeated " not in m.string:
                full[
                    (m["logger"], re.sub(r"[0-9a-f-]{36}|\d+(\.\d+)?", "N", m.string[m.end() :]))
                ] += 1
        assert full, err
        assert max(full.values()) <= 5, (full, err)
        assert err.count("Traceback (most recent call last)") <= len(full), err
        assert "[repeated " in err, err
