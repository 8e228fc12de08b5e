"""Readiness of the API role: the database answers and its schema is at the migration head."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from scheduling.adapters.postgres.schema_head import recorded_revisions
from scheduling.domain.reasons import reason

DATABASE_UNREACHABLE = reason(
    "schedule.readiness.database_unreachable", "The database did not answer the readiness probe"
)
SCHEMA_NOT_AT_HEAD = reason(
    "schedule.readiness.schema_not_at_head",
    "The database schema is not at the migration head this build expects",
)


class SchemaReadiness:
    """``problems()`` is empty when ready; else ``code: explanation`` lines (no secrets)."""

    def __init__(self, engine: AsyncEngine, head: str) -> None:
        # ``head``: the migration head this build expects, from the composition root
        # (``HEAD_REVISION``: no Alembic is imported to learn it; ADR 2751).
        self._engine = engine
        self._head = head

    async def problems(self) -> list[str]:
        try:
            async with self._engine.connect() as conn:
                versions = list(await recorded_revisions(conn))
        except Exception:  # any driver failure: not ready (the cause stays out of the body)
            return [f"{DATABASE_UNREACHABLE}: the database did not answer"]
        if versions != [self._head]:
            return [f"{SCHEMA_NOT_AT_HEAD}: database at {versions or 'none'}, head {self._head}"]
        return []
