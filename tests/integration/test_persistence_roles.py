"""Deployment roles: the scheduler login's release check, a materialization through a
login holding exactly the allowlist, and concurrent idempotent role creation."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gates.checks.persistence_support import (
    ALICE,
    MALLORY,
    T0,
    PersistenceWorld,
    admin_connection,
    seeded_world,
)
from scheduling.adapters.postgres.migrations import (
    current_revision,
    head_revision,
)
from scheduling.adapters.postgres.release_check import scheduler_release_problems
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import AuthorizationError, NotFoundError
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.domain.paging import PageRequest
from scheduling.ports.records import IdempotencyEntry, ProcessEvent, RunCheckpoint, SessionEvent
from scheduling.ports.repositories import FORBIDDEN, ScheduleCommand

CHECKOUT = Path(__file__).resolve().parents[2]  # holds the developers' alembic.ini

ROLES = role_names()


@pytest.fixture
async def scheduler_login(pg_url: str) -> AsyncIterator[tuple[str, str]]:
    """A LOGIN that is a member of the scheduler group role only: (name, url)."""
    name = f"sched_login_{secrets.token_hex(4)}"
    password = secrets.token_hex(12)
    async with admin_connection(pg_url) as conn:
        await conn.execute(
            text(f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE {ROLES.scheduler}")
        )
        await conn.commit()
    url = make_url(pg_url).set(username=name, password=password)
    try:
        yield name, url.render_as_string(hide_password=False)
    finally:
        async with admin_connection(pg_url) as conn:
            await conn.execute(text(f"DROP OWNED BY {name}"))
            await conn.execute(text(f"DROP ROLE {name}"))
            await conn.commit()


async def test_exact_scheduler_login_passes_release_validation(
    scheduler_login: tuple[str, str],
) -> None:
    assert await scheduler_release_problems(scheduler_login[1]) == []
    cli = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "scheduling.adapters.postgres.release_check", scheduler_login[1]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "matches the release allowlist" in cli.stdout


@pytest.mark.parametrize(
    ("grant", "phrase"),
    [
        ("GRANT UPDATE ON process_events TO {login}", "process_events: holds UPDATE"),
        (
            "GRANT UPDATE (payload) ON session_events TO {login}",
            "session_events: holds column UPDATE",
        ),
        ("GRANT DELETE ON runs TO {login}", "runs: holds DELETE"),
        ("GRANT SELECT ON schedule_idempotency_keys TO {login}", "schedule_idempotency_keys"),
        ("GRANT UPDATE (run_id) ON schedule_occurrences TO {login}", "schedule_occurrences"),
        ("REVOKE INSERT ON runs FROM {scheduler}", "runs: lacks INSERT"),
        ("ALTER ROLE {login} BYPASSRLS", "has BYPASSRLS"),
        ("ALTER ROLE {login} SUPERUSER", "is a superuser"),
        ("GRANT {api} TO {login}", f"holds the privileges of role {ROLES.api}"),
        ("UPDATE alembic_version SET version_num = 'stale'", "schema head"),
    ],
)
async def test_release_validation_reports_each_deviation(
    pg_url: str, scheduler_login: tuple[str, str], grant: str, phrase: str
) -> None:
    login, url = scheduler_login
    async with admin_connection(pg_url) as conn:
        await conn.execute(
            text(grant.format(login=login, scheduler=ROLES.scheduler, api=ROLES.api))
        )
        await conn.commit()
    problems = await scheduler_release_problems(url)
    assert any(phrase in p for p in problems), problems


async def test_a_due_run_materializes_through_the_exact_allowlist(
    pg_url: str, scheduler_login: tuple[str, str]
) -> None:

    world: PersistenceWorld = await seeded_world(pg_url)
    mine = world.of(ALICE)
    factory = PostgresUnitOfWorkFactory.from_url(scheduler_login[1], pool_size=1)
    now = mine.schedule.next_fire_at
    assert now is not None
    try:
        async with factory.begin() as uow:
            assert mine.schedule.id in await uow.schedules.due(now, 10)
            locked = await uow.schedules.lock_due(mine.schedule.id, now)
            assert locked is not None
            revision = await uow.schedules.get_revision(locked.id, locked.current_revision, None)
            assert await uow.principals.get(locked.tenant_id, locked.principal_id) is not None
            assert await uow.agents.get_version(revision.agent_id, revision.agent_version)
            assert await uow.occurrences.latest(locked.id, OccurrenceDisposition.MATERIALIZED)
            session = replace(mine.session, id=world.uuid(), created_at=now, updated_at=now)
            run = replace(mine.run, id=world.uuid(), session_id=session.id, created_at=now)
            occurrence = mine.materialized.model_copy(
                update={
                    "id": world.uuid(),
                    "nominal_fire_at": now,
                    "materialized_at": now,
                    "session_id": session.id,
                    "run_id": run.id,
                    "created_at": now,
                }
            )
            await uow.occurrences.insert(occurrence)
            await uow.sessions.create(session)
            await uow.sessions.append_event(
                SessionEvent(session.id, 1, "session.created", "scheduler", {}, now)
            )
            await uow.sessions.append_event(
                SessionEvent(session.id, 2, "message.user", "scheduler", {}, now, True)
            )
            await uow.runs.create(run)
            await uow.runs.add_checkpoint(RunCheckpoint(run.id, 0, 0, {}, now))
            await uow.events.append(
                ProcessEvent(
                    world.uuid(),
                    locked.tenant_id,
                    locked.principal_id,
                    "schedule.occurrence.materialized",
                    "scheduler",
                    {},
                    now,
                    locked.id,
                )
            )
            advanced = locked.model_copy(
                update={"next_fire_at": now + timedelta(days=1), "updated_at": now}
            )
            await uow.schedules.mutate(ScheduleCommand(expected=locked, updated=advanced))
            await uow.tx.execute(text("SELECT pg_notify('scheduling_schedules', :p)"), {"p": "x"})
            await uow.commit()
        async with factory.begin() as uow:
            assert await uow.occurrences.for_run(run.id) == occurrence
        # No UPDATE on event logs, revisions stay immutable, nothing is deleted.
        for statement in (
            "UPDATE process_events SET actor = 'x'",
            "UPDATE session_events SET actor = 'x'",
            "UPDATE schedule_revisions SET created_by_principal_id = 'x'",
            "UPDATE schedules SET current_revision = 1",
            "DELETE FROM runs",
        ):
            async with factory.begin() as uow:
                with pytest.raises(AuthorizationError) as caught:
                    await uow.tx.execute(text(statement))
                assert caught.value.code == FORBIDDEN, statement
    finally:
        await factory.dispose()
    assert now > T0


def _upgrade(url: str, prefix: str) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENT_SCHEDULE_DATABASE_URL": url, "AGENT_SCHEDULE_ROLE_PREFIX": prefix}
    return subprocess.Popen(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=CHECKOUT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_role_creation_is_idempotent_and_safe_under_concurrency(pg_server: object) -> None:
    from simulation.provider._database_server import DatabaseServer

    assert isinstance(pg_server, DatabaseServer)
    prefix = f"t{secrets.token_hex(4)}"
    urls = [pg_server.create_database() for _ in range(3)]
    try:
        procs = [_upgrade(url, prefix) for url in urls]
        outcomes = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], outcomes
        for url in urls:
            assert await current_revision(url) == head_revision()
        async with admin_connection(urls[0]) as conn:
            names = sorted(
                r[0]
                for r in await conn.execute(
                    text("SELECT rolname FROM pg_roles WHERE rolname LIKE :p"), {"p": f"{prefix}_%"}
                )
            )
        assert names == sorted(role_names(prefix).every())
    finally:
        for url in urls:
            async with admin_connection(url) as conn:
                for role in role_names(prefix).every():
                    await conn.execute(text(f"DROP OWNED BY {role} CASCADE"))
                await conn.commit()
            pg_server.drop_database(url)
        async with admin_connection(pg_server.info.dsn) as conn:
            for role in role_names(prefix).every():
                await conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
            await conn.commit()
    await asyncio.sleep(0)


async def test_api_role_privileges_suffice_for_its_operations(pg_url: str) -> None:
    world = await seeded_world(pg_url)
    api = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=ROLES.api, pool_size=1)
    owned = world.build_owner(ALICE)
    first = owned.schedule.model_copy(update={"current_revision": 1})
    try:
        async with api.begin(ALICE) as uow:
            await uow.schedules.create(first, world.revision(first.id, 1, ALICE))
            await uow.idempotency.record(
                IdempotencyEntry("tenant-a", "alice", "create-2", "h", first.id, T0)
            )
            await uow.events.append(
                ProcessEvent(
                    world.uuid(), "tenant-a", "alice", "schedule.created", "api", {}, T0, first.id
                )
            )
            await uow.commit()
        paused = first.model_copy(
            update={
                "state": "PAUSED",
                "pause_reason": "user",
                "next_fire_at": None,
                "current_revision": 2,
                "updated_at": T0 + timedelta(hours=1),
            }
        )
        async with api.begin(ALICE) as uow:
            await uow.schedules.mutate(
                ScheduleCommand(first, paused, ALICE, world.revision(first.id, 2, ALICE))
            )
            await uow.commit()
        async with api.begin(ALICE) as uow:
            page = await uow.schedules.list(ALICE, PageRequest(limit=10))
            assert first.id in {s.id for s in page.items}
            history = await uow.occurrences.list(world.of(ALICE).schedule.id, ALICE, PageRequest())
            assert len(history.items) == 2
            erased = await uow.sessions.erase(world.of(ALICE).session.id, ALICE, T0)
            assert erased.occurrences_marked == 1
            await uow.commit()
    finally:
        await api.dispose()


async def test_maintenance_role_purges_only_its_tenant(pg_url: str) -> None:
    world = await seeded_world(pg_url)
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    maintenance = PostgresUnitOfWorkFactory.from_url(
        pg_url, assume_role=ROLES.maintenance, pool_size=1
    )
    done_at = T0 + timedelta(days=1)
    try:
        async with admin.begin() as uow:
            for owner in (ALICE, MALLORY):
                current = world.of(owner).schedule
                await uow.schedules.mutate(
                    ScheduleCommand(
                        current,
                        current.model_copy(
                            update={
                                "state": "CANCELLED",
                                "next_fire_at": None,
                                "updated_at": done_at,
                            }
                        ),
                    )
                )
            await uow.commit()
        cutoff = done_at + timedelta(days=30)
        # Scoped to tenant-a, asking for tenant-b finds nothing (row-level security).
        async with maintenance.begin(tenant_id="tenant-a") as uow:
            assert await uow.schedules.purge_terminal("tenant-b", cutoff, 10) == 0
            assert await uow.schedules.purge_terminal("tenant-a", cutoff, 10) == 1
            await uow.commit()
        async with admin.begin() as uow:
            with pytest.raises(NotFoundError):
                await uow.schedules.get(world.of(ALICE).schedule.id, None)
            assert (await uow.schedules.get(world.of(MALLORY).schedule.id, None)).id
            # Sessions and runs are never purged with schedule history.
            assert (await uow.sessions.get(world.of(ALICE).session.id, None)).id
            assert (await uow.runs.get(world.of(ALICE).run.id, None)).id
    finally:
        await admin.dispose()
        await maintenance.dispose()
