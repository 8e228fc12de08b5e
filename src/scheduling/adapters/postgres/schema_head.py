"""The migration head this build ships, and the revision a database stands at, both
known without Alembic: Alembic and the packages it imports (mako, and pygments where it
is installed) cost about 0.1 s, which ``scheduling migrate`` on a database already at
the head, and the API's readiness, need not pay (ADR 2751).

``HEAD_REVISION`` repeats the head of the chain in ``scheduling/migrations/versions``:
``tests/unit/test_schema_head.py`` compares it with the head Alembic computes, so a new
revision without this line changed fails the suite."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from scheduling.adapters.postgres.errors import ENGINE_ERRORS, translate
from scheduling.adapters.postgres.urls import named_engine

HEAD_REVISION = "0009_parent_policy_probes"
"""The head of the migration chain this build ships."""

# Alembic keeps its version table unqualified, on the search path; so does this read.
_VERSIONS = text("SELECT version_num FROM alembic_version ORDER BY version_num")
_HAS_VERSIONS = text("SELECT to_regclass('alembic_version') IS NOT NULL")


async def recorded_revisions(conn: AsyncConnection) -> tuple[str, ...]:
    """The revisions the database records, sorted: empty when it was never migrated, one
    for this linear chain. What ``migrate``, the API's readiness and ``release-check``
    each compare with ``HEAD_REVISION``."""
    if not await conn.scalar(_HAS_VERSIONS):
        return ()
    return tuple(str(row[0]) for row in await conn.execute(_VERSIONS))


async def database_revisions(url: str) -> tuple[str, ...]:
    """``recorded_revisions`` of the database at ``url``, read as the migration login."""
    engine = named_engine(url, "migrate")
    try:
        async with engine.connect() as conn:
            return await recorded_revisions(conn)
    except ENGINE_ERRORS as exc:
        # One coded line (``schedule.database.unavailable``...), never a traceback.
        raise translate(exc) from exc
    finally:
        await engine.dispose()


async def at_head(url: str) -> bool:
    """Whether the database at ``url`` stands exactly at ``HEAD_REVISION``."""
    return await database_revisions(url) == (HEAD_REVISION,)
