"""rule.config.release_validation, the privilege half: the scheduler login's release
check verifies the *exact* table privileges, both ways, and every authority a login
could hold beyond them; and ``scheduling logins`` gives each login exactly its kind's
group role.

* A scheduler login created as ``scheduling logins`` creates it passes
  ``bootstrap.scheduler_release_problems``; each of these, alone, fails it: a column
  UPDATE the materializer never advances (``schedules.tenant_id``), TRUNCATE on the
  occurrence ledger, BYPASSRLS held through a granted non-deployment role, CREATEROLE,
  CREATEDB, and - the other way round - an INSERT or a column UPDATE the role needs
  revoked from its group (a login that lacks what materialization writes is no more
  releasable than one that holds more).
* A login of each kind (``api``, ``scheduler``, ``maintenance``, ``run-worker``)
  created by ``bootstrap.create_login`` holds the privileges of exactly that kind's
  group role and of no other deployment role, and none of superuser, BYPASSRLS,
  CREATEROLE, CREATEDB; the run-worker login passes its own release check.
* A login name that is not one whole lower-case identifier (a role option or a second
  statement spliced after it, a trailing newline, upper case) is refused with
  ``schedule.logins.invalid`` and creates no role.

Tests of the test: ``scheduling-gates mutate`` (``plumbing.release_column_excess_accepted``,
``plumbing.release_truncate_unchecked``, ``plumbing.release_inherited_bypass_unchecked``,
``plumbing.release_missing_grant_accepted``, ``plumbing.release_createrole_accepted``,
``plumbing.api_login_joins_scheduler``, ``plumbing.login_name_prefix_match``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.domain.errors import SchedulingError, ValidationError
from scheduling.testing import PostgresUnitOfWorkFactory, to_asyncpg_url

RULE = "rule.config.release_validation"
pytestmark = [pytest.mark.postgres, pytest.mark.rule(RULE)]


def login_url(url: str, login: str, password: str) -> str:
    return make_url(url).set(username=login, password=password).render_as_string(False)


async def execute(url: str, statements: Sequence[str]) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            for statement in statements:
                await conn.execute(text(statement))
    finally:
        await admin.dispose()


@pytest.fixture
async def logins(pg_url: str) -> AsyncIterator[list[str]]:
    """Logins created by the test (dropped after it)."""
    made: list[str] = []
    try:
        yield made
    finally:
        for login in made:
            await execute(pg_url, [f"DROP OWNED BY {login}", f"DROP ROLE {login}"])


async def create(pg_url: str, made: list[str], kind: str) -> str:
    """A login of ``kind`` created as ``scheduling logins`` creates it; its URL."""
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    login = f"gate_plumb_{kind.replace('-', '_')}_{secrets.token_hex(4)}"
    password = bootstrap.generate_password()
    await bootstrap.create_login(pg_url, roles, kind, login, password)
    made.append(login)
    return login_url(pg_url, login, password)


async def test_the_scheduler_release_check_is_exact_both_ways(
    pg_url: str, logins: list[str], gate_evidence: GateEvidence
) -> None:
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    url = await create(pg_url, logins, "scheduler")
    login = make_url(url).username
    assert await bootstrap.scheduler_release_problems(url, roles) == []
    bypass = f"gate_plumb_bypass_{secrets.token_hex(4)}"
    group = roles.scheduler
    # (what the login holds or lacks, statements that do it, statements that undo it,
    # a phrase the release check's problem must contain)
    cases: dict[str, tuple[list[str], list[str], str]] = {
        "UPDATE of a schedule column it never advances": (
            [f"GRANT UPDATE (tenant_id) ON schedules TO {login}"],
            [f"REVOKE UPDATE (tenant_id) ON schedules FROM {login}"],
            "tenant_id",
        ),
        "TRUNCATE on the occurrence ledger": (
            [f"GRANT TRUNCATE ON schedule_occurrences TO {login}"],
            [f"REVOKE TRUNCATE ON schedule_occurrences FROM {login}"],
            "TRUNCATE",
        ),
        "BYPASSRLS through a granted role": (
            [f"CREATE ROLE {bypass} NOLOGIN BYPASSRLS", f"GRANT {bypass} TO {login}"],
            [f"REVOKE {bypass} FROM {login}", f"DROP ROLE {bypass}"],
            bypass,
        ),
        "CREATEROLE": (
            [f"ALTER ROLE {login} CREATEROLE"],
            [f"ALTER ROLE {login} NOCREATEROLE"],
            "create roles",
        ),
        "CREATEDB": (
            [f"ALTER ROLE {login} CREATEDB"],
            [f"ALTER ROLE {login} NOCREATEDB"],
            "create roles",
        ),
        "no INSERT of the run it materializes": (
            [f"REVOKE INSERT ON runs FROM {group}"],
            [f"GRANT INSERT ON runs TO {group}"],
            "runs: lacks INSERT",
        ),
        "no UPDATE of next_fire_at": (
            [f"REVOKE UPDATE (next_fire_at) ON schedules FROM {group}"],
            [f"GRANT UPDATE (next_fire_at) ON schedules TO {group}"],
            "next_fire_at",
        ),
    }
    refused: dict[str, list[str]] = {}
    for name, (do, undo, phrase) in cases.items():
        await execute(pg_url, do)
        try:
            problems = await bootstrap.scheduler_release_problems(url, roles)
        finally:
            await execute(pg_url, undo)
        assert any(phrase in p for p in problems), (
            f"a scheduler login with {name} passes release validation",
            problems,
        )
        refused[name] = problems
    assert await bootstrap.scheduler_release_problems(url, roles) == []
    gate_evidence.record("refused", refused)


MEMBERSHIP = (
    "SELECT r.rolname, pg_has_role(current_user, r.oid, 'USAGE') AS member"
    " FROM pg_roles r WHERE r.rolname = ANY(:roles)"
)
AUTHORITY = (
    "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolcanlogin"
    " FROM pg_roles WHERE rolname = current_user"
)


async def test_each_login_joins_exactly_its_kinds_group(
    pg_url: str, logins: list[str], gate_evidence: GateEvidence
) -> None:
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    groups = {
        "api": roles.api,
        "scheduler": roles.scheduler,
        "maintenance": roles.maintenance,
        "run-worker": roles.run_worker,
    }
    assert set(groups) == set(bootstrap.ROLE_KINDS)
    held: dict[str, list[str]] = {}
    for kind, group in groups.items():
        url = await create(pg_url, logins, kind)
        engine = create_async_engine(to_asyncpg_url(url), poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                rows = (await conn.execute(text(MEMBERSHIP), {"roles": list(roles.every())})).all()
                authority = (await conn.execute(text(AUTHORITY))).one()
        finally:
            await engine.dispose()
        member = sorted(r.rolname for r in rows if r.member)
        assert member == [group], (kind, member)
        assert tuple(authority) == (False, False, False, False, True), (kind, authority)
        held[kind] = member
        if kind == "run-worker":
            assert await bootstrap.run_worker_release_problems(url, roles) == []
    gate_evidence.record("groups_held", held)


FORGED_LOGINS = (
    "gate_plumb_evil SUPERUSER",
    "gate_plumb_evil IN ROLE scheduling_owner",
    "gate_plumb_evil;",
    "gate_plumb_newline\n",
    "Gate_plumb_upper",
)


async def test_a_login_name_that_is_not_one_identifier_is_refused(
    pg_url: str, logins: list[str], gate_evidence: GateEvidence
) -> None:
    """The login name is spliced into CREATE ROLE: only a whole lower-case identifier
    is accepted, so no name can carry a role option (SUPERUSER, IN ROLE) or a second
    statement; each is the stable schedule.logins.invalid and creates no role."""
    roles = bootstrap.role_names(bootstrap.DEFAULT_ROLE_PREFIX)
    refused: dict[str, str] = {}
    for name in FORGED_LOGINS:
        try:
            await bootstrap.create_login(pg_url, roles, "scheduler", name, "pw-unused-1")
        except ValidationError as exc:
            refused[name] = exc.code
        except SchedulingError as exc:  # refused, but not as an invalid name
            refused[name] = f"other: {exc.code}"
        else:
            refused[name] = "created"
            logins.append(name.split()[0].rstrip(";").strip())
    found = await _roles_like(pg_url, "gate_plumb_evil%")
    found += await _roles_like(pg_url, "gate_plumb_newline%")
    logins.extend(r for r in found if r not in logins)
    assert refused == dict.fromkeys(FORGED_LOGINS, "schedule.logins.invalid"), refused
    assert found == [], found
    gate_evidence.record("refused", sorted(refused))


async def _roles_like(url: str, pattern: str) -> list[str]:
    engine = create_async_engine(to_asyncpg_url(url), poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text("SELECT rolname FROM pg_roles WHERE rolname LIKE :p"), {"p": pattern}
            )
            return [str(r[0]) for r in rows]
    finally:
        await engine.dispose()
