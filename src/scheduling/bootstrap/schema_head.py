"""Where a database stands against the migration head this build ships, known without
Alembic (ADR 2751): ``migrate`` on a database already at the head, and the API's
readiness, import no migration runner."""

from __future__ import annotations

from scheduling.adapters.postgres.schema_head import HEAD_REVISION, at_head

__all__ = ["HEAD_REVISION", "at_head"]
