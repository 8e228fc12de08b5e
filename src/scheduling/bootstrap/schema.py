"""The database schema as the operator commands (``migrate``, ``dev``) reach it: upgrade
to the migration head and read where a database stands. The Alembic runner behind these
names is imported only when one of them is first asked for (ADR 2750), so no other
command, and no command's ``--help``, imports Alembic."""

from __future__ import annotations

from scheduling.adapters.postgres.migrations import current_revision, head_revision, upgrade_to_head

__all__ = ["current_revision", "head_revision", "upgrade_to_head"]
