"""Least-privilege logins for a test: one scheduler and one run-worker login, each only
in its group role, dropped afterwards."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text

from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory

ROLES = role_names()


async def execute(url: str, statement: str) -> None:
    """Run one statement as the trusted login at ``url``, in its own transaction."""
    admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        async with admin.engine.begin() as conn:
            await conn.execute(text(statement))
    finally:
        await admin.dispose()


@asynccontextmanager
async def role_logins(url: str, tag: str) -> AsyncIterator[dict[str, str]]:
    """``{"scheduler": name, "run_worker": name}``, names starting with ``tag``."""
    suffix = secrets.token_hex(4)
    names = {"scheduler": f"{tag}_sched_{suffix}", "run_worker": f"{tag}_run_{suffix}"}
    await execute(url, f"CREATE ROLE {names['scheduler']} LOGIN IN ROLE {ROLES.scheduler}")
    await execute(url, f"CREATE ROLE {names['run_worker']} LOGIN IN ROLE {ROLES.run_worker}")
    try:
        yield names
    finally:
        for name in names.values():
            await execute(url, f"DROP OWNED BY {name}")
            await execute(url, f"DROP ROLE {name}")
