"""The run worker's least-privilege role and the login command (issue 13 item 6).

``scheduling logins create run-worker LOGIN`` makes a login in ``<prefix>_run_worker``
without hand-written SQL, the server holds only a SCRAM verifier, ``rotate`` replaces
it; the release check of that login is clean, a real run worker completes a run
through it, and the check finds a login holding more than the allowlist."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling.adapters.postgres.logins import scram_verifier, verifier_matches
from scheduling.adapters.postgres.release_check import run_worker_release_problems
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import QueueCapacity
from simulation.engine.clock import VirtualClock
from simulation.worlds.runtime import run_row, run_worker, seed_tool_agent, submission, submitter
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

SCRIPT = str(Path(sys.executable).parent / "scheduling")
ROLES = role_names()
WHO = principal("login-runner", scopes={"memory.read"})


def cli(url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["AGENT_SCHEDULE_DATABASE_URL"] = url
    return subprocess.run(
        [SCRIPT, "logins", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def sql(url: str, statement: str, **params: Any) -> list[Any]:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        await admin.dispose()


def as_login(url: str, login: str) -> str:
    return make_url(url).set(username=login, password=None).render_as_string(hide_password=False)


@pytest.fixture
async def login(pg_url: str) -> AsyncIterator[str]:
    name = f"i13_login_{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        await sql(pg_url, f"DROP OWNED BY {name} CASCADE") if await sql(
            pg_url, "SELECT 1 FROM pg_roles WHERE rolname = :r", r=name
        ) else None
        await sql(pg_url, f"DROP ROLE IF EXISTS {name}")


async def _verifier(url: str, login: str) -> str:
    return str(
        (await sql(url, "SELECT rolpassword FROM pg_authid WHERE rolname = :r", r=login))[0][0]
    )


async def test_create_and_rotate_a_run_worker_login(pg_url: str, login: str) -> None:
    secret = "correct horse battery staple 42"
    made = cli(pg_url, "create", "run-worker", login, "--password-stdin", stdin=secret + "\n")
    assert made.returncode == 0, made.stderr
    assert secret not in made.stdout + made.stderr
    stored = await _verifier(pg_url, login)
    assert stored.startswith("SCRAM-SHA-256$")
    assert verifier_matches(stored, secret)
    assert secret not in stored
    attrs = (
        await sql(
            pg_url,
            "SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreatedb, rolcreaterole"
            " FROM pg_roles WHERE rolname = :r",
            r=login,
        )
    )[0]
    assert tuple(attrs) == (True, False, False, False, False)
    groups = await sql(
        pg_url,
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
        " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = :r",
        r=login,
    )
    assert [g[0] for g in groups] == [ROLES.run_worker]
    # A second create refuses with a stable code and changes nothing.
    again = cli(pg_url, "create", "run-worker", login, "--password-stdin", stdin="other\n")
    assert again.returncode == 1
    assert "schedule.logins.exists" in again.stderr
    assert await _verifier(pg_url, login) == stored
    # Rotate with a generated password, printed once.
    rotated = cli(pg_url, "rotate", login)
    assert rotated.returncode == 0, rotated.stderr
    shown = [line for line in rotated.stdout.splitlines() if "shown once" in line]
    assert len(shown) == 1
    new = shown[0].split(": ", 1)[1]
    fresh = await _verifier(pg_url, login)
    assert verifier_matches(fresh, new)
    assert not verifier_matches(fresh, secret)
    # Bad input: a stable code, no traceback.
    bad = cli(pg_url, "create", "superuser", "x_login", "--password-stdin", stdin="p\n")
    assert bad.returncode != 0
    assert "Traceback" not in bad.stderr


def test_scram_verifier_is_the_rfc_format() -> None:
    # RFC 7677 test vector is for SCRAM exchange; here: deterministic with a fixed salt.
    one = scram_verifier("pencil", salt=b"\x00" * 16)
    assert one == scram_verifier("pencil", salt=b"\x00" * 16)
    assert one.startswith("SCRAM-SHA-256$4096:AAAAAAAAAAAAAAAAAAAAAA==$")
    assert verifier_matches(one, "pencil")
    assert not verifier_matches(one, "pencils")


async def test_the_run_worker_login_passes_release_and_runs_a_run(pg_url: str, login: str) -> None:
    made = cli(pg_url, "create", "run-worker", login, "--password-stdin", stdin="pw-run\n")
    assert made.returncode == 0, made.stderr
    worker_url = as_login(pg_url, login)
    assert await run_worker_release_problems(worker_url) == []
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=2)
    own = PostgresUnitOfWorkFactory.from_url(worker_url, pool_size=2)
    try:
        await seed_durable(admin, [WHO])
        await seed_tool_agent(admin, START)
        clock = VirtualClock(START)
        run = await submitter(admin, clock).submit(WHO, submission("steps:2"))
        worker = run_worker(own, clock, "w-login", capacity=QueueCapacity(4, 1, 1))
        outcome = await worker.run_once()
        assert outcome is not None
        assert outcome.status == "COMPLETED"
        assert (await run_row(admin, run.id)).status is RunStatus.COMPLETED
        # Nothing beyond its allowlist: it cannot read schedules or principals.
        async with own.engine.connect() as conn:
            with pytest.raises(Exception, match="permission denied"):
                await conn.execute(text("SELECT count(*) FROM schedules"))
    finally:
        await own.dispose()
        await admin.dispose()


async def test_of_the_test_a_login_with_more_than_the_allowlist_is_reported(
    pg_url: str, login: str
) -> None:
    made = cli(pg_url, "create", "run-worker", login, "--password-stdin", stdin="pw\n")
    assert made.returncode == 0, made.stderr
    await sql(pg_url, f"GRANT UPDATE (limits) ON runs TO {login}")
    await sql(pg_url, f"GRANT {ROLES.scheduler} TO {login}")
    problems = await run_worker_release_problems(as_login(pg_url, login))
    assert any("limits" in p for p in problems), problems
    assert any(ROLES.scheduler in p for p in problems), problems
