"""What ``scheduling logins`` sends the server, for every kind of login.

* The password never reaches the server as text: every statement and parameter the
  adapter sends (seen by an engine-level ``before_cursor_execute`` listener, which
  sees every SQLAlchemy engine of the process) holds its SCRAM verifier, never the
  password, on create and on rotate; the stored verifier is the rotated password's.
* Each kind of login joins exactly its own group role.
* Only a whole lower-case identifier is a login name: a name with a trailing newline,
  a statement after it, capitals, quotes or too many characters is refused with
  ``schedule.logins.invalid`` before anything is sent, and no role is created.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from tests.integration.test_logins_and_run_worker_role import sql

from scheduling.adapters.postgres.logins import (
    LOGIN_INVALID,
    create_login,
    generate_password,
    rotate_password,
    verifier_matches,
)
from scheduling.adapters.postgres.roles import ROLE_KINDS, role_names
from scheduling.domain.errors import ValidationError

pytestmark = pytest.mark.postgres

ROLES = role_names()


@pytest.fixture
async def login(pg_url: str) -> AsyncIterator[str]:
    name = f"stmt_login_{secrets.token_hex(4)}"
    try:
        yield name
    finally:
        await sql(pg_url, f"DROP ROLE IF EXISTS {name}")


@pytest.fixture
def sent() -> Iterator[list[str]]:
    """Every statement and its parameters any engine of the process sends."""
    seen: list[str] = []

    def spy(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append(f"{statement} {parameters!r}")

    event.listen(Engine, "before_cursor_execute", spy)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", spy)


async def test_only_the_verifier_is_sent(pg_url: str, login: str, sent: list[str]) -> None:
    password, rotated = generate_password(), generate_password()
    await create_login(pg_url, ROLES, "api", login, password)
    await rotate_password(pg_url, ROLES, login, rotated)
    everything = "\n".join(sent)
    assert password not in everything, "the password was sent as text"
    assert rotated not in everything, "the rotated password was sent as text"
    assert everything.count("PASSWORD 'SCRAM-SHA-256$") == 2, sent
    (stored,) = await sql(pg_url, "SELECT rolpassword FROM pg_authid WHERE rolname = :r", r=login)
    assert verifier_matches(str(stored[0]), rotated)


GROUPS = {
    "api": ROLES.api,
    "scheduler": ROLES.scheduler,
    "maintenance": ROLES.maintenance,
    "run-worker": ROLES.run_worker,
}
"""Written out here, not read from the adapter's own map (which is what is checked)."""


def test_every_kind_is_named() -> None:
    assert sorted(GROUPS) == sorted(ROLE_KINDS)


@pytest.mark.parametrize("kind", ROLE_KINDS)
async def test_each_kind_joins_exactly_its_group(pg_url: str, login: str, kind: str) -> None:
    await create_login(pg_url, ROLES, kind, login, generate_password())
    groups = await sql(
        pg_url,
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
        " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = :r",
        r=login,
    )
    assert [g[0] for g in groups] == [GROUPS[kind]]


@pytest.mark.parametrize(
    "name",
    [
        "login_ok\n",
        "login_ok; DROP ROLE x",
        "login_ok LOGIN SUPERUSER",
        "Login_ok",
        "login'ok",
        'login"ok',
        "l" * 64,
        "",
        "1login",
    ],
)
async def test_only_a_whole_identifier_names_a_login(
    pg_url: str, sent: list[str], name: str
) -> None:
    before = await sql(pg_url, "SELECT rolname FROM pg_roles ORDER BY rolname")
    already = len(sent)
    with pytest.raises(ValidationError) as refused:
        await create_login(pg_url, ROLES, "api", name, generate_password())
    assert refused.value.code == LOGIN_INVALID
    with pytest.raises(ValidationError) as rotate_refused:
        await rotate_password(pg_url, ROLES, name, generate_password())
    assert rotate_refused.value.code == LOGIN_INVALID
    assert sent[already:] == [], "a statement was sent for an invalid name"
    assert await sql(pg_url, "SELECT rolname FROM pg_roles ORDER BY rolname") == before
