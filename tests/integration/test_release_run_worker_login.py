"""``release-check`` requires the run-worker login like the scheduler's (issue 13
item 6): with both least-privilege logins it is clean; a missing run-worker URL, a
run-worker login holding more than its allowlist, and one that cannot connect each
fail with their own stable code."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.cli.release import release_problems
from scheduling.config import Settings, problem_codes
from testsupport.production_env import GOOD

pytestmark = pytest.mark.postgres

ROLES = role_names()


async def sql(url: str, statement: str) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await admin.dispose()


def as_login(url: str, login: str) -> str:
    return make_url(url).set(username=login, password=None).render_as_string(hide_password=False)


@pytest.fixture
async def logins(pg_url: str) -> AsyncIterator[dict[str, str]]:
    """A scheduler login and a run-worker login, each only in its group role."""
    suffix = secrets.token_hex(4)
    names = {"scheduler": f"rc_sched_{suffix}", "run_worker": f"rc_run_{suffix}"}
    await sql(pg_url, f"CREATE ROLE {names['scheduler']} LOGIN IN ROLE {ROLES.scheduler}")
    await sql(pg_url, f"CREATE ROLE {names['run_worker']} LOGIN IN ROLE {ROLES.run_worker}")
    try:
        yield names
    finally:
        for name in names.values():
            await sql(pg_url, f"DROP OWNED BY {name}")
            await sql(pg_url, f"DROP ROLE {name}")


def settings(pg_url: str, logins: dict[str, str], **env: Any) -> Settings:
    values = {
        **GOOD,
        "AGENT_SCHEDULE_DATABASE_URL": pg_url,
        "AGENT_SCHEDULE_SCHEDULER_DATABASE_URL": as_login(pg_url, logins["scheduler"]),
        "AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL": as_login(pg_url, logins["run_worker"]),
    }
    for key, value in env.items():
        if value is None:
            values.pop(f"AGENT_SCHEDULE_{key}", None)
        else:
            values[f"AGENT_SCHEDULE_{key}"] = value
    return Settings.from_env(values)


async def test_both_least_privilege_logins_pass(pg_url: str, logins: dict[str, str]) -> None:
    assert await release_problems(settings(pg_url, logins)) == []


async def test_a_missing_run_worker_login_fails(pg_url: str, logins: dict[str, str]) -> None:
    problems = await release_problems(settings(pg_url, logins, RUN_WORKER_DATABASE_URL=None))
    assert problem_codes(problems) == ["schedule.config.run_worker_login_missing"], problems


async def test_an_over_privileged_run_worker_login_fails(
    pg_url: str, logins: dict[str, str]
) -> None:
    await sql(pg_url, f"GRANT {ROLES.scheduler} TO {logins['run_worker']}")
    await sql(pg_url, f"GRANT UPDATE (limits) ON runs TO {logins['run_worker']}")
    problems = await release_problems(settings(pg_url, logins))
    assert set(problem_codes(problems)) == {"schedule.config.run_worker_privileges"}, problems
    assert any(ROLES.scheduler in p for p in problems), problems
    assert any("limits" in p for p in problems), problems


async def test_an_unreachable_run_worker_login_fails(pg_url: str, logins: dict[str, str]) -> None:
    absent = as_login(pg_url, f"rc_absent_{secrets.token_hex(4)}")
    problems = await release_problems(settings(pg_url, logins, RUN_WORKER_DATABASE_URL=absent))
    assert problem_codes(problems) == ["schedule.config.run_worker_unreachable"], problems
