"""Claim facts on runs: the first claim's instant and the count of lease reclaims.

Revision ID: 0006_run_claim_facts
Revises: 0005_run_worker_role
Create Date: 2026-12-01

The run queue's claim writes ``first_claimed_at`` once (``coalesce``) and adds one to
``lease_reclaims`` when it takes a run whose previous lease expired, so the API's
``/metrics`` computes claim latency per lane and lease reclaims from committed rows
(ADR 1504, ADR 1512). The run-worker role, which claims, may update exactly these two
columns beside its earlier ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from scheduling.adapters.postgres.roles import RUN_CLAIM_COLUMNS, role_names

revision: str = "0006_run_claim_facts"
down_revision: str | None = "0005_run_worker_role"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("first_claimed_at", sa.DateTime(timezone=True)))
    op.add_column(
        "runs",
        sa.Column("lease_reclaims", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    columns = ", ".join(RUN_CLAIM_COLUMNS)
    op.execute(f"GRANT UPDATE ({columns}) ON runs TO {role_names().run_worker}")


def downgrade() -> None:
    # Dropping the columns drops their column privileges with them.
    op.drop_column("runs", "lease_reclaims")
    op.drop_column("runs", "first_claimed_at")
