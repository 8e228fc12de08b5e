"""The queue notification moves into the schema: inserting a QUEUED run notifies.

Revision ID: 0007_run_queued_notify
Revises: 0006_run_claim_facts
Create Date: 2026-12-01

An ``AFTER INSERT`` row trigger on ``runs`` sends ``pg_notify`` on the fixed run
channel with the run's id whenever a run is inserted QUEUED. PostgreSQL delivers it at
commit and drops it on rollback, exactly like the materializer's former in-transaction
``SELECT pg_notify`` (ADR 1700), but without a statement of its own: one round trip
less per materialization, and every queued run (not only scheduled ones) wakes the
run workers (ADR 1750). The function writes nothing and needs no privilege, so no role
gains any; ``pg_catalog.pg_notify`` is schema-qualified so ``search_path`` cannot
redirect it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007_run_queued_notify"
down_revision: str | None = "0006_run_claim_facts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "scheduling_run_queued"  # notify.RUN_CHANNEL, frozen here as this revision sent it


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION scheduling_run_queued_notify() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_catalog.pg_notify('{CHANNEL}', NEW.id::text);
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE TRIGGER runs_queued_notify AFTER INSERT ON runs
        FOR EACH ROW WHEN (NEW.status = 'QUEUED')
        EXECUTE FUNCTION scheduling_run_queued_notify()
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER runs_queued_notify ON runs")
    op.execute("DROP FUNCTION scheduling_run_queued_notify()")
