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
from sqlalchemy.engine import Connection

from scheduling.adapters.postgres.errors import ENGINE_ERRORS, translate
from scheduling.adapters.postgres.urls import named_engine

# The chain's env.py imports only this runner and the tables (test_migrations_frozen).
from scheduling.adapters.postgres.urls import to_asyncpg_url as to_asyncpg_url

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


async def _with_connection(url: str, action: Any) -> Any:
    engine = named_engine(url, "migrate")
    try:
        async with engine.connect() as conn:
            result = await conn.run_sync(action)
            await conn.commit()
            return result
    except ENGINE_ERRORS as exc:
        # A driver error is the domain error with its stable code (the driver's own
        # kept as the cause): ``scheduling migrate`` against a server that refuses
        # prints one line, not a traceback.
        raise translate(exc) from exc
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
