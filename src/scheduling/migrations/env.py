"""Alembic environment: async engine (asyncpg), metadata from the product's tables.

Three ways in:

* ``scheduling.adapters.postgres.migrations`` passes an open synchronous connection
  in ``config.attributes["connection"]`` (run inside ``AsyncConnection.run_sync``);
* it may pass a URL in ``config.attributes["url"]``;
* the command line (``alembic upgrade head``) reads ``AGENT_SCHEDULE_DATABASE_URL``.

The revisions carry their own literal SQL (ADR 2161) and import no product code; the
one thing they receive is the deployment's role prefix, the migration parameter
``config.attributes["scheduling.role_prefix"]``, resolved here once: the caller's
attribute, else ``-x role_prefix=...``, else ``AGENT_SCHEDULE_ROLE_PREFIX``, else
``scheduling``. The product metadata imported below is only autogenerate's comparison
target: it never changes what a revision executes.
"""

from __future__ import annotations

import asyncio
import os
import re

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.adapters.postgres.migrations import URL_ENV, include_object, to_asyncpg_url
from scheduling.adapters.postgres.tables import metadata

config = context.config
target_metadata = metadata

ROLE_PREFIX_ATTRIBUTE = "scheduling.role_prefix"
ROLE_PREFIX_ENV = "AGENT_SCHEDULE_ROLE_PREFIX"
DEFAULT_ROLE_PREFIX = "scheduling"
_PREFIX = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


def _role_prefix() -> str:
    chosen = (
        config.attributes.get(ROLE_PREFIX_ATTRIBUTE)
        or context.get_x_argument(as_dictionary=True).get("role_prefix")
        or os.environ.get(ROLE_PREFIX_ENV)
        or DEFAULT_ROLE_PREFIX
    )
    if not isinstance(chosen, str) or not _PREFIX.match(chosen):
        raise SystemExit(f"role prefix {chosen!r} must be a lower-case SQL identifier")
    return chosen


config.attributes[ROLE_PREFIX_ATTRIBUTE] = _role_prefix()


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        compare_server_default=True,
        include_object=include_object,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = config.attributes.get("url") or os.environ.get(URL_ENV)
    if not url:
        raise SystemExit(f"set {URL_ENV} to the database URL (postgresql://user@host:port/db)")
    return to_asyncpg_url(str(url))


async def _run_async() -> None:
    engine = create_async_engine(_url(), poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure_and_run)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure_and_run(connection)
    else:
        asyncio.run(_run_async())


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported: run against a database")
run_migrations_online()
