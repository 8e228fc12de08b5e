"""``release-check`` requires the run-worker login like the scheduler's (issue 13
item 6): with both least-privilege logins it is clean; a missing run-worker URL, a
run-worker login holding more than its allowlist, and one that cannot connect each
fail with their own stable code."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from scheduling.cli.release import release_problems
from scheduling.config import Settings, problem_codes
from testsupport.logins import ROLES, execute, role_logins
from testsupport.production_env import GOOD

pytestmark = pytest.mark.postgres


def as_login(url: str, login: str) -> str:
    return make_url(url).set(username=login, password=None).render_as_string(hide_password=False)


@pytest.fixture
async def logins(pg_url: str) -> AsyncIterator[dict[str, str]]:
    """A scheduler login and a run-worker login, each only in its group role."""
    async with role_logins(pg_url, "rc") as names:
        yield names


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
    await execute(pg_url, f"GRANT {ROLES.scheduler} TO {logins['run_worker']}")
    await execute(pg_url, f"GRANT UPDATE (limits) ON runs TO {logins['run_worker']}")
    problems = await release_problems(settings(pg_url, logins))
    assert set(problem_codes(problems)) == {"schedule.config.run_worker_privileges"}, problems
    assert any(ROLES.scheduler in p for p in problems), problems
    assert any("limits" in p for p in problems), problems


async def test_an_unreachable_run_worker_login_fails(pg_url: str, logins: dict[str, str]) -> None:
    absent = as_login(pg_url, f"rc_absent_{secrets.token_hex(4)}")
    problems = await release_problems(settings(pg_url, logins, RUN_WORKER_DATABASE_URL=absent))
    assert problem_codes(problems) == ["schedule.config.run_worker_unreachable"], problems
