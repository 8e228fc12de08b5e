"""The operator CLI as real subprocesses against a fresh database: ``migrate``,
``release-check`` (clean and failing), ``scheduler`` (materializes a due schedule on
the wall clock, then SIGTERM ends it with exit 0), ``run-worker --class async``
(executes that run, SIGTERM, exit 0), ``repair-next-fire`` and ``purge``."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling import bootstrap as b
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.config import Settings
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import definition, principal, seed_durable
from testsupport.production_env import production_env_at

pytestmark = pytest.mark.postgres

SCRIPT = str(Path(sys.executable).parent / "scheduling")
WHO = principal("cli-owner")


def production_env(admin_url: str, scheduler_url: str, run_worker_url: str = "") -> dict[str, str]:
    env = {
        **production_env_at(admin_url, scheduler_url, run_worker_url, WHO.tenant_id),
        # A long poll: a prompt exit on SIGTERM shows the sleep wakes on the stop request.
        "AGENT_SCHEDULE_FALLBACK_POLL_SECONDS": "60",
    }
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}, **env}


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


async def sql(url: str, statement: str, **params: Any) -> list[dict[str, Any]]:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []
    finally:
        await admin.dispose()


async def wait_for_rows(url: str, statement: str, seconds: float, **params: Any) -> list[Any]:
    deadline = time.monotonic() + seconds
    while True:
        rows = await sql(url, statement, **params)
        if rows or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.2)


def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [SCRIPT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the process prints a line once it is serving
    assert "started" in first, (first, proc.stderr.read() if proc.poll() is not None else "")
    return proc


STOP_SECONDS: list[float] = []


def terminate(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()  # never leave a server process behind a failed test
        proc.communicate()
        raise
    STOP_SECONDS.append(time.monotonic() - began)
    print(f"{proc.args[1]}: exit {proc.returncode} {STOP_SECONDS[-1]:.2f} s after SIGTERM")
    return proc.returncode, out, err


@pytest.fixture
async def fresh(pg_empty_url: str) -> AsyncIterator[tuple[str, str, str]]:
    """(admin URL, scheduler login URL, run-worker login URL) of an empty database
    migrated by the CLI."""
    migrated = cli("migrate", "--url", pg_empty_url, env=production_env(pg_empty_url, ""))
    assert migrated.returncode == 0, migrated.stderr
    assert "migration head" in migrated.stdout
    name = f"cli_sched_{secrets.token_hex(4)}"
    password = secrets.token_hex(12)
    await sql(
        pg_empty_url,
        f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE {role_names().scheduler}",
    )
    login = make_url(pg_empty_url).set(username=name, password=password)
    runner = f"cli_run_{secrets.token_hex(4)}"
    await sql(
        pg_empty_url,
        f"CREATE ROLE {runner} LOGIN PASSWORD '{password}' IN ROLE {role_names().run_worker}",
    )
    run_login = make_url(pg_empty_url).set(username=runner, password=password)
    try:
        yield (
            pg_empty_url,
            login.render_as_string(hide_password=False),
            run_login.render_as_string(hide_password=False),
        )
    finally:
        for role in (name, runner):
            await sql(pg_empty_url, f"DROP OWNED BY {role}")
            await sql(pg_empty_url, f"DROP ROLE {role}")


def test_release_check_fails_on_a_default_off_split(pg_empty_url: str) -> None:
    env = production_env(pg_empty_url, "")
    env.update({"AGENT_SCHEDULE_API_ENABLED": "1", "AGENT_SCHEDULE_WORKER_ENABLED": "0"})
    done = cli("release-check", env=env)
    assert done.returncode == 1
    assert "PROBLEM: schedule.config.flags_split" in done.stderr


async def test_operator_commands_against_a_fresh_database(fresh: tuple[str, str, str]) -> None:
    admin_url, login_url, run_login_url = fresh
    env = production_env(admin_url, login_url, run_login_url)

    clean = cli("release-check", env=env)
    assert (clean.returncode, clean.stderr) == (0, ""), clean.stderr
    assert "release check passed" in clean.stdout
    refused = cli("release-check", "--scheduler-url", admin_url, env=env)
    assert refused.returncode == 1
    assert "PROBLEM: schedule.config.scheduler_privileges" in refused.stderr

    # A one-time schedule whose instant passed 30 s ago (database clock), within grace.
    db_now = (await sql(admin_url, "SELECT now() AS t"))[0]["t"]
    admin = PostgresUnitOfWorkFactory.from_url(admin_url, pool_size=1)
    await seed_durable(admin, [WHO], at=db_now - timedelta(minutes=5))
    await admin.dispose()
    api = b.build_api(
        Settings.from_env(env), clock=VirtualClock(db_now - timedelta(minutes=1)), ids=SeededIds(9)
    )
    try:
        at = (db_now - timedelta(seconds=30)).isoformat()
        created = await api.service.create(
            WHO, "cli-1", definition(cadence={"kind": "ONCE", "at": at})
        )
    finally:
        await api.close()
    sid = created.schedule.id

    scheduler = start("scheduler", env=env)
    try:
        occurrences = await wait_for_rows(
            admin_url,
            "SELECT run_id FROM schedule_occurrences WHERE schedule_id = :i"
            " AND disposition = 'MATERIALIZED'",
            20,
            i=sid,
        )
    finally:
        code, out, err = terminate(scheduler)
    assert code == 0, err
    assert "scheduler stopped" in out
    assert STOP_SECONDS[-1] < 10, "the scheduler slept through SIGTERM (60 s poll)"
    assert len(occurrences) == 1, err
    run_id = occurrences[0]["run_id"]

    worker = start("run-worker", "--class", "async", env=env)
    try:
        finished = await wait_for_rows(
            admin_url,
            "SELECT status FROM runs WHERE id = :i AND status = 'COMPLETED'",
            20,
            i=run_id,
        )
    finally:
        code, out, err = terminate(worker)
    assert code == 0, err
    assert "run worker stopped" in out
    assert finished == [{"status": "COMPLETED"}]

    repair = cli("repair-next-fire", str(sid), env=env)
    assert repair.returncode == 0, repair.stderr
    assert repair.stdout.startswith("consistent")
    missing = cli("repair-next-fire", "00000000-0000-4000-8000-000000000000", env=env)
    assert missing.returncode == 1
    assert "schedule.not_found" in missing.stderr

    purge = cli("purge", env=env)
    assert purge.returncode == 0, purge.stderr
    assert f"{WHO.tenant_id}: 0 terminal schedule(s) purged" in purge.stdout
