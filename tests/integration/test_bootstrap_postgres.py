"""The production builders on real PostgreSQL, wired only from an environment mapping:

* the API builder's create commits, then notifies; the scheduler builder's wake
  listener (connected as the least-privilege scheduler LOGIN) receives it;
* the scheduler builder materializes the due schedule end to end through that login;
* the async run worker (disjoint from the interactive one) executes the run and the
  post-run hook accounts it;
* maintenance repairs a corrupted ``next_fire_at`` through the scheduler login and
  purges through the maintenance role;
* the release check of the login is clean, and a superuser login is refused.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling import bootstrap as b
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.cli.release import SCHEDULER_PRIVILEGES, release_problems
from scheduling.config import Settings
from scheduling.ports.runtime import RunPriority
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import START, definition, principal, seed_durable
from testsupport.production_env import production_env_at

pytestmark = pytest.mark.postgres

WHO = principal("bootstrap-owner")


def production_env(admin_url: str, scheduler_url: str, run_worker_url: str = "") -> dict[str, str]:
    env = production_env_at(admin_url, scheduler_url, run_worker_url, WHO.tenant_id)
    prefix = os.environ.get("AGENT_SCHEDULE_ROLE_PREFIX")
    if prefix:
        env["AGENT_SCHEDULE_ROLE_PREFIX"] = prefix
    return env


async def sql(url: str, statement: str, **params: Any) -> list[dict[str, Any]]:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []
    finally:
        await admin.dispose()


@pytest.fixture
async def scheduler_login(pg_url: str) -> AsyncIterator[str]:
    """A LOGIN holding exactly the scheduler group role (the release allowlist)."""
    async for url in _login(pg_url, "boot_sched", role_names().scheduler):
        yield url


@pytest.fixture
async def run_worker_login(pg_url: str) -> AsyncIterator[str]:
    """A LOGIN holding exactly the run-worker group role (its release allowlist)."""
    async for url in _login(pg_url, "boot_run", role_names().run_worker):
        yield url


async def _login(pg_url: str, prefix: str, group: str) -> AsyncIterator[str]:
    name = f"{prefix}_{secrets.token_hex(4)}"
    password = secrets.token_hex(12)
    await sql(pg_url, f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE {group}")
    try:
        yield (
            make_url(pg_url)
            .set(username=name, password=password)
            .render_as_string(hide_password=False)
        )
    finally:
        await sql(pg_url, f"DROP OWNED BY {name}")
        await sql(pg_url, f"DROP ROLE {name}")


async def test_production_roles_end_to_end(
    pg_url: str, scheduler_login: str, run_worker_login: str
) -> None:
    settings = Settings.from_env(production_env(pg_url, scheduler_login, run_worker_login))
    assert await release_problems(settings) == []
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    await seed_durable(admin, [WHO], at=START)
    await admin.dispose()

    clock = VirtualClock(START)
    api = b.build_api(settings, clock=clock, ids=SeededIds("api"))
    scheduler = b.build_scheduler(
        b.SchedulerSettings.of(settings), clock=clock, ids=SeededIds("scheduler")
    )
    workers = {
        p: b.build_run_worker(settings, p, clock=clock, ids=SeededIds(p.name)) for p in RunPriority
    }
    maintenance = b.build_maintenance(settings, clock=clock, ids=SeededIds("maintenance"))
    try:
        # The scheduler connects as its own login, not through SET ROLE on the admin.
        assert isinstance(scheduler.uow, PostgresUnitOfWorkFactory)
        assert scheduler.uow.assume_role is None
        assert scheduler.uow.engine.url.username == make_url(scheduler_login).username
        assert scheduler.listener is not None
        await scheduler.start()

        # API create -> commit -> NOTIFY -> the scheduler's listener wakes.
        created = await api.service.create(WHO, "boot-1", definition())
        await asyncio.wait_for(scheduler.listener.wait(), timeout=10)
        assert scheduler.listener.received >= 1

        # Not yet due: nothing happens.
        early = await scheduler.worker.run_once()
        assert early.scanned == []

        fire = created.schedule.next_fire_at
        assert fire is not None
        clock.advance((fire - clock.now() + timedelta(seconds=1)).total_seconds())
        report = await scheduler.worker.run_once()
        assert report.errors == {}
        assert [r.status.value for r in report.results] == ["decided"]
        run_id = report.results[0].run_id
        assert run_id is not None
        run = (await sql(pg_url, "SELECT * FROM runs WHERE id = :i", i=run_id))[0]
        assert (run["status"], run["priority"]) == ("QUEUED", 10)
        occurrence = (
            await sql(pg_url, "SELECT * FROM schedule_occurrences WHERE run_id = :i", i=run_id)
        )[0]
        assert occurrence["disposition"] == "MATERIALIZED"

        # Disjoint classes: the interactive worker never claims the scheduled run.
        interactive, asynchronous = workers[RunPriority.INTERACTIVE], workers[RunPriority.ASYNC]
        assert interactive.queue.classes.isdisjoint(asynchronous.queue.classes)
        assert await interactive.worker.run_once() is None
        outcome = await asynchronous.worker.run_once()
        assert outcome is not None
        assert (outcome.run_id, outcome.status) == (str(run_id), "COMPLETED")
        # The run worker's own login cannot touch schedules: the scheduler's sweep
        # accounts the run.
        assert await scheduler.worker.account() == 1
        accounted = await sql(
            pg_url,
            "SELECT payload FROM process_events WHERE event_type = 'schedule.run_accounted'",
        )
        assert [e["payload"]["run_id"] for e in accounted] == [str(run_id)]

        # Repair through the scheduler login: a corrupted cache is fixed and audited.
        sid = created.schedule.id
        assert not (await maintenance.repair_next_fire(sid)).repaired
        await sql(pg_url, "UPDATE schedules SET next_fire_at = NULL WHERE id = :i", i=sid)
        repair = await maintenance.repair_next_fire(sid)
        assert repair.repaired
        assert repair.current is not None
        assert repair.current > clock.now()

        # Purge through the maintenance role: nothing terminal and old yet.
        assert await maintenance.purge_once() == {WHO.tenant_id: 0}
    finally:
        for role in (api, scheduler, *workers.values(), maintenance):
            await role.close()


async def test_release_check_refuses_a_superuser_scheduler_login(pg_url: str) -> None:
    # The migration login stands in for the scheduler: config and privileges both fail.
    env = production_env(pg_url, pg_url)
    problems = await release_problems(Settings.from_env(env))
    codes = [p.split(":", 1)[0] for p in problems]
    assert "schedule.config.scheduler_login_missing" in codes
    assert SCHEDULER_PRIVILEGES in codes
    assert any("superuser" in p or "BYPASSRLS" in p or "beyond" in p for p in problems)
