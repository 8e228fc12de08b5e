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

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from gates.checks.persistence_support import ALICE, T0, World, admin_connection, seeded_world
from scheduling.adapters.postgres.migrations import (
    SCHEDULING_REVISION,
    current_revision,
    project_root,
)
from scheduling.adapters.postgres.release_check import scheduler_release_problems
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import AuthorizationError
from scheduling.domain.occurrence import OccurrenceDisposition
from scheduling.ports.records import ProcessEvent, RunCheckpoint, SessionEvent
from scheduling.ports.repositories import FORBIDDEN, ScheduleCommand

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
    world: World = await seeded_world(pg_url)
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
    env = {**os.environ, "SCHEDULING_DATABASE_URL": url, "SCHEDULING_ROLE_PREFIX": prefix}
    return subprocess.Popen(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=project_root(),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_role_creation_is_idempotent_and_safe_under_concurrency(pg_server: object) -> None:
    from simulation.database._server import DatabaseServer

    assert isinstance(pg_server, DatabaseServer)
    prefix = f"t{secrets.token_hex(4)}"
    urls = [pg_server.create_database() for _ in range(3)]
    try:
        procs = [_upgrade(url, prefix) for url in urls]
        outcomes = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], outcomes
        for url in urls:
            assert await current_revision(url) == SCHEDULING_REVISION
        async with admin_connection(urls[0]) as conn:
            names = sorted(
                r[0]
                for r in await conn.execute(
                    text("SELECT rolname FROM pg_roles WHERE rolname LIKE :p"), {"p": f"{prefix}_%"}
                )
            )
        assert names == sorted(role_names(prefix).all())
    finally:
        for url in urls:
            async with admin_connection(url) as conn:
                for role in role_names(prefix).all():
                    await conn.execute(text(f"DROP OWNED BY {role} CASCADE"))
                await conn.commit()
            pg_server.drop_database(url)
        async with admin_connection(pg_server.info.dsn) as conn:
            for role in role_names(prefix).all():
                await conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
            await conn.commit()
    await asyncio.sleep(0)
