"""Create and rotate the LOGIN users of a deployment's group roles.

The password never reaches the server as text: the client computes the SCRAM-SHA-256
verifier (RFC 5802/7677, PostgreSQL's ``pg_authid.rolpassword`` format) and sends only
that, so no statement log, error log or ``pg_stat_activity`` row can show it. The
login gets exactly one group role and none of superuser, BYPASSRLS, CREATEDB,
CREATEROLE. Existence is checked first (no failed statement, no ERROR line).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from scheduling.adapters.postgres.errors import translate
from scheduling.adapters.postgres.roles import ROLE_KINDS, RoleNames
from scheduling.adapters.postgres.urls import named_engine
from scheduling.domain.errors import ConflictError, NotFoundError, ValidationError
from scheduling.domain.reasons import reason

LOGIN_INVALID = reason(
    "schedule.logins.invalid", "The login name or role is not one a deployment may create"
)
LOGIN_EXISTS = reason("schedule.logins.exists", "A role with that login name already exists")
LOGIN_MISSING = reason(
    "schedule.logins.missing", "No login with that name exists (or it is not a login)"
)

SCRAM_ITERATIONS = 4096
_LOGIN = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A whole lower-case identifier (``fullmatch``: ``$`` alone would let a trailing
newline through into the statement)."""


def scram_verifier(
    password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    """``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` for ``password``."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def verifier_matches(verifier: str, password: str) -> bool:
    """Whether ``verifier`` was computed from ``password`` (same salt and iterations)."""
    match = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$([^:]+):(.+)", verifier)
    if match is None:
        return False
    expected = scram_verifier(password, salt=base64.b64decode(match[2]), iterations=int(match[1]))
    return hmac.compare_digest(expected, verifier)


def generate_password() -> str:
    """A random password for a new login (shown once to the operator)."""
    return secrets.token_urlsafe(24)


def group_role(roles: RoleNames, kind: str) -> str:
    """The group role a login of ``kind`` joins."""
    by_kind = {
        "api": roles.api,
        "scheduler": roles.scheduler,
        "maintenance": roles.maintenance,
        "run-worker": roles.run_worker,
    }
    if kind not in by_kind:
        raise ValidationError(LOGIN_INVALID, f"role must be one of {', '.join(ROLE_KINDS)}")
    return by_kind[kind]


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    """Driver errors become domain errors (never a traceback at the CLI)."""
    try:
        yield
    except (DBAPIError, OSError) as exc:
        raise translate(exc) from None


@dataclass(frozen=True)
class LoginResult:
    login: str
    group: str | None
    created: bool


def _check_login(login: str, roles: RoleNames) -> None:
    if not _LOGIN.fullmatch(login) or login in roles.every():
        raise ValidationError(
            LOGIN_INVALID, "the login must be a lower-case identifier and not a group role"
        )


async def create_login(
    admin_url: str, roles: RoleNames, kind: str, login: str, password: str
) -> LoginResult:
    """``CREATE ROLE login LOGIN PASSWORD <verifier> IN ROLE <group>`` (nothing more)."""
    group = group_role(roles, kind)
    _check_login(login, roles)
    verifier = scram_verifier(password)
    engine = named_engine(admin_url, "logins")
    try:
        async with _translated(), engine.begin() as conn:
            found = await conn.execute(
                text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": login}
            )
            if found.first() is not None:
                raise ConflictError(LOGIN_EXISTS, "that login exists; rotate its password")
            group_found = await conn.execute(
                text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": group}
            )
            if group_found.first() is None:
                raise NotFoundError(
                    LOGIN_MISSING, f"group role {group} does not exist; run the migrations"
                )
            # Identifiers are validated above; the verifier is base64 and '$' only.
            # (driver SQL: the verifier's ':' must not read as a bind parameter)
            await conn.exec_driver_sql(
                f"CREATE ROLE {login} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB"
                f" NOCREATEROLE PASSWORD '{verifier}' IN ROLE {group}"
            )
    finally:
        await engine.dispose()
    return LoginResult(login, group, True)


async def rotate_password(
    admin_url: str, roles: RoleNames, login: str, password: str
) -> LoginResult:
    """``ALTER ROLE login PASSWORD <verifier>`` for an existing login."""
    _check_login(login, roles)
    verifier = scram_verifier(password)
    engine = named_engine(admin_url, "logins")
    try:
        async with _translated(), engine.begin() as conn:
            found = await conn.execute(
                text("SELECT rolcanlogin FROM pg_roles WHERE rolname = :r"), {"r": login}
            )
            row = found.first()
            if row is None or not row.rolcanlogin:
                raise NotFoundError(LOGIN_MISSING, "no such login")
            await conn.exec_driver_sql(f"ALTER ROLE {login} PASSWORD '{verifier}'")
    finally:
        await engine.dispose()
    return LoginResult(login, None, False)
