"""Run the Alembic chain from code (tests, the provider's template) or explain the CLI.

``upgrade_to_head(url)`` is what the PostgreSQL provider calls to migrate its
template database and what ``scheduling migrate`` runs. The chain (``env.py``,
``versions/``) ships inside the package, ``scheduling/migrations/``, and is found with
``importlib.resources`` - from a checkout, an editable install or a wheel alike -
unless ``SCHEDULING_MIGRATIONS_DIR`` names another directory holding ``env.py`` (or,
as before, one holding ``migrations/env.py``). The repository's ``alembic.ini`` is
for developers running the ``alembic`` command; the code needs no ini file.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.instance import server_settings

URL_ENV = "AGENT_SCHEDULE_DATABASE_URL"
MIGRATIONS_DIR_ENV = "SCHEDULING_MIGRATIONS_DIR"

# Revision identifiers of the chain, named so tests and gates can address them.
SUBSTRATE_REVISION = "0001_substrate"
SCHEDULING_REVISION = "0002_scheduling"
TOOL_PIPELINE_REVISION = "0003_tool_pipeline"
ADMISSION_WINDOW_REVISION = "0004_admission_window"

# Objects that exist in the database but are deliberately not in the metadata.
_UNMANAGED_TABLES = frozenset({"alembic_version"})


def migrations_dir() -> Path:
    """The directory holding the chain's ``env.py`` and ``versions/``."""
    override = os.environ.get(MIGRATIONS_DIR_ENV)
    if override:
        root = Path(override).resolve()
        return root / "migrations" if (root / "migrations" / "env.py").is_file() else root
    packaged = resources.files("scheduling") / "migrations"
    # A wheel or a checkout keeps the package on the file system (Alembic needs paths).
    path = Path(str(packaged))
    if not (path / "env.py").is_file():
        raise RuntimeError(f"the migration chain is missing from {path}; set {MIGRATIONS_DIR_ENV}")
    return path


DEFAULT_PORT = 5432


def _host_list_as_query(url: str) -> str:
    """libpq's multi-host form ``scheme://user@h1:p1,h2:p2/db?...`` as SQLAlchemy's
    ``scheme://user@/db?host=h1:p1&host=h2:p2&...`` (a missing port is 5432), which the
    asyncpg dialect hands to ``asyncpg.connect`` as its host and port lists. A URL
    naming one host is returned unchanged."""
    scheme, sep, rest = url.partition("://")
    authority, _, tail = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if not sep or "," not in hosts:
        return url
    pairs = [h if ":" in h else f"{h}:{DEFAULT_PORT}" for h in hosts.split(",")]
    path, _, query = tail.partition("?")
    params = "&".join(f"host={pair}" for pair in pairs)
    query = f"{params}&{query}" if query else params
    return f"{scheme}://{userinfo}{at}/{path}?{query}"


def to_asyncpg_url(url: str) -> str:
    """Turn a libpq ``postgresql://`` URL into SQLAlchemy's ``postgresql+asyncpg://`` form.

    Multi-host URLs (failover, docs/operations/failover.md) work in both spellings,
    libpq's ``h1:p1,h2:p2`` and SQLAlchemy's repeated ``host=`` parameter; with
    ``target_session_attrs=read-write`` asyncpg connects to the read-write server."""
    parsed = make_url(_host_list_as_query(url))
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+asyncpg")
    query = dict(parsed.query)
    sslmode = query.pop("sslmode", None)
    if sslmode is not None and "ssl" not in query:
        query["ssl"] = sslmode
    return parsed.set(query=query).render_as_string(hide_password=False)


ROLE_PREFIX_ATTRIBUTE = "scheduling.role_prefix"
"""The migration parameter naming the deployment's roles (``env.py``, ADR 2161)."""


def alembic_config(url: str | None = None, *, role_prefix: str | None = None) -> Config:
    """An Alembic config for the packaged chain (no ini file needed). Without
    ``role_prefix`` the chain's ``env.py`` reads ``AGENT_SCHEDULE_ROLE_PREFIX``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    if url is not None:
        cfg.attributes["url"] = url
    if role_prefix is not None:
        cfg.attributes[ROLE_PREFIX_ATTRIBUTE] = role_prefix
    return cfg


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate filter: ignore Alembic's own version table."""
    return not (type_ == "table" and name in _UNMANAGED_TABLES)


def head_revision() -> str:
    """The head of the migration chain."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration chain has no head")
    return head


def named_engine(url: str, role: str) -> AsyncEngine:
    """An engine without a pool for a command's few statements, each connection named
    ``<role>@<instance id>`` in pg_stat_activity (ADR 2270)."""
    return create_async_engine(
        to_asyncpg_url(url),
        poolclass=NullPool,
        connect_args={"server_settings": server_settings(role)},
    )


async def _with_connection(url: str, action: Any) -> Any:
    engine = named_engine(url, "migrate")
    try:
        async with engine.connect() as conn:
            result = await conn.run_sync(action)
            await conn.commit()
            return result
    finally:
        await engine.dispose()


def _command(name: str, target: str, role_prefix: str | None = None) -> Any:
    def run(sync_conn: Connection) -> None:
        cfg = alembic_config(role_prefix=role_prefix)
        cfg.attributes["connection"] = sync_conn
        getattr(command, name)(cfg, target)

    return run


async def upgrade_to_head(url: str, *, role_prefix: str | None = None) -> None:
    """Migrate the database at ``url`` (libpq URL) to the head of the chain."""
    await _with_connection(url, _command("upgrade", "head", role_prefix))


async def upgrade_to(url: str, revision: str, *, role_prefix: str | None = None) -> None:
    """Migrate the database at ``url`` up to ``revision``."""
    await _with_connection(url, _command("upgrade", revision, role_prefix))


async def downgrade_to(url: str, revision: str, *, role_prefix: str | None = None) -> None:
    """Migrate down to ``revision`` (``"base"`` removes every managed object)."""
    await _with_connection(url, _command("downgrade", revision, role_prefix))


async def downgrade_to_base(url: str) -> None:
    """Undo every revision."""
    await downgrade_to(url, "base")


async def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at (``None`` when unmigrated)."""

    def read(sync_conn: Connection) -> str | None:
        return MigrationContext.configure(sync_conn).get_current_revision()

    result: str | None = await _with_connection(url, read)
    return result
