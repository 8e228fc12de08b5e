"""``rule.config.release_validation``: release validation checks each least-privilege
login's privileges, so each role production builds must act through its own login.

On PostgreSQL with a deployment's five logins - the migration (trusted) login and an
API, a scheduler, a run-worker and a maintenance login created as ``scheduling logins``
creates them (``bootstrap.create_login``) - every role is built from ``Settings``
alone (no storage injected: the role opens its own) and does its work once:

* the API (``build_api``) reads a principal from the durable directory;
* the run worker (``build_run_worker``) claims and completes a run;
* the scheduler (``build_scheduler``) scans for due schedules;
* the maintenance role (``build_maintenance``) runs a purge sweep.

Every connection each role opened (named ``<role>@<instance>``, ADR 2270) logs in as
that role's own login: never the migration login, and never another role's.

``rule.wakeup.at_commit``: the scheduler production builds on its own login (no trusted
URL at all, as production runs it) listens: a schedule the API role built on its own
login creates wakes it, through a LISTEN connection of the scheduler's login.

Tests of the test: ``scheduling-gates mutate`` (``wiring.run_worker_scheduler_login``,
``wiring.run_worker_trusted_despite_own_login``, ``wiring.scheduler_migration_login``,
``wiring.maintenance_purge_scheduler_login``, ``wiring.api_scheduler_login``,
``wiring.wake_listener_trusted_url_only``).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.config import Settings
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import RunPriority
from scheduling.testing import PostgresUnitOfWorkFactory
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.runtime import run_row, submission, submitter
from simulation.worlds.service import START, definition, principal, seed_durable, world_settings

pytestmark = pytest.mark.postgres

RULE = "rule.config.release_validation"
WHO = principal("login-runner", scopes={"memory.read"})
OWNER = principal("login-owner")
KINDS = {
    "api": "api",
    "scheduler": "scheduler",
    "run_worker": "run-worker",
    "maintenance": "maintenance",
}


def login_url(url: str, login: str, password: str) -> str:
    return make_url(url).set(username=login, password=password).render_as_string(False)


async def execute(url: str, *statements: str) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await admin.dispose()


@pytest.fixture
async def logins(pg_url: str) -> AsyncIterator[dict[str, tuple[str, str]]]:
    """Role -> (login name, URL), each login only in its group role."""
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    made: dict[str, tuple[str, str]] = {}
    try:
        for role, kind in KINDS.items():
            login = f"gate_{role}_{secrets.token_hex(4)}"
            password = bootstrap.generate_password()
            await bootstrap.create_login(pg_url, roles, kind, login, password)
            made[role] = (login, login_url(pg_url, login, password))
        yield made
    finally:
        for login, _ in made.values():
            await execute(pg_url, f"DROP OWNED BY {login}", f"DROP ROLE {login}")


def deployment(pg_url: str, logins: dict[str, tuple[str, str]]) -> Settings:
    return world_settings(
        AGENT_SCHEDULE_DATABASE_URL=pg_url,
        AGENT_SCHEDULE_API_DATABASE_URL=logins["api"][1],
        AGENT_SCHEDULE_SCHEDULER_DATABASE_URL=logins["scheduler"][1],
        AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL=logins["run_worker"][1],
        AGENT_SCHEDULE_MAINTENANCE_DATABASE_URL=logins["maintenance"][1],
        AGENT_SCHEDULE_TENANTS=WHO.tenant_id,
    )


async def connections(admin: PostgresUnitOfWorkFactory) -> set[tuple[str, str]]:
    """(login, role) of every connection a role opened in this database."""
    async with admin.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT usename, split_part(application_name, '@', 1) AS role"
                " FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name LIKE '%@%' AND pid <> pg_backend_pid()"
            )
        )
        return {(r.usename, r.role) for r in rows}


@pytest.mark.rule(RULE)
async def test_each_role_acts_through_its_own_login(
    pg_url: str, logins: dict[str, tuple[str, str]], gate_evidence: GateEvidence
) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=2)
    clock = VirtualClock(START)
    ids = SeededIds(11)
    configured = deployment(pg_url, logins)
    seen: dict[str, set[tuple[str, str]]] = {}
    try:
        await seed_durable(admin, [WHO])
        run = await submitter(admin, clock).submit(
            WHO, submission("succeed", priority=RunPriority.ASYNC)
        )
        clock.advance(1)

        api = bootstrap.build_api(configured, clock=clock, ids=ids.fork("api"))
        try:
            snapshot = await api.principals.current(WHO.tenant_id, WHO.principal_id)
            seen["api"] = await connections(admin)
        finally:
            await api.close()
        assert snapshot is not None, "the API role does not see the principal"

        worker = bootstrap.build_run_worker(
            configured, RunPriority.ASYNC, clock=clock, ids=ids.fork("run-worker")
        )
        try:
            outcome = await worker.worker.run_once()
            seen["run_worker"] = await connections(admin)
        finally:
            await worker.close()
        assert outcome is not None, "the run worker claimed nothing"
        assert (await run_row(admin, run.id)).status is RunStatus.COMPLETED, outcome

        scheduler = bootstrap.build_scheduler(
            bootstrap.SchedulerSettings.of(configured), clock=clock, ids=ids.fork("scheduler")
        )
        try:
            await scheduler.worker.run_once()
            seen["scheduler"] = await connections(admin)
        finally:
            await scheduler.close()

        maintenance = bootstrap.build_maintenance(configured, clock=clock, ids=ids.fork("purge"))
        try:
            await maintenance.purge_once()
            seen["maintenance"] = await connections(admin)
        finally:
            await maintenance.close()
    finally:
        await admin.dispose()
    gate_evidence.record("connections", {k: sorted(v) for k, v in seen.items()})
    for role, found in seen.items():
        assert found, f"the {role} role opened no named connection"
        # The maintenance role's repair half is the scheduler's, through its login.
        own = {logins[role][0]} | ({logins["scheduler"][0]} if role == "maintenance" else set())
        wrong = {(login, name) for login, name in found if login not in own}
        assert not wrong, f"the {role} role connected through another login: {wrong}"
        assert (logins[role][0], role) in found, f"the {role} role never used its login: {found}"


@pytest.mark.rule("rule.wakeup.at_commit")
async def test_the_scheduler_on_its_own_login_is_woken_by_a_create(
    pg_url: str, logins: dict[str, tuple[str, str]], gate_evidence: GateEvidence
) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=2)
    clock = VirtualClock(START)
    ids = SeededIds(13)
    configured = deployment(pg_url, logins)
    try:
        await seed_durable(admin, [OWNER])
        scheduler = bootstrap.build_scheduler(
            bootstrap.SchedulerSettings.of(configured), clock=clock, ids=ids.fork("scheduler")
        )
        api = bootstrap.build_api(configured, clock=clock, ids=ids.fork("api"))
        try:
            assert scheduler.listener is not None, (
                "the scheduler on its own login listens to nothing"
            )
            await scheduler.start()
            listening = await connections(admin)
            await api.service.create(OWNER, "wake-me", definition())
            await asyncio.wait_for(scheduler.listener.wait(), timeout=10)
            received = scheduler.listener.received
        finally:
            await api.close()
            await scheduler.close()
    finally:
        await admin.dispose()
    assert received == 1, f"{received} notifications for one create"
    assert (logins["scheduler"][0], "scheduler") in listening, listening
    gate_evidence.record("listening", sorted(listening))
