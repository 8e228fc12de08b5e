"""Indexes that bound the admission usage read to its time windows (ADR 1702).

Revision ID: 0004_admission_window
Revises: 0002_scheduling
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004_admission_window"
down_revision: str | None = "0003_tool_pipeline"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (name, columns): active runs, the rolling cost windows, the one-minute rate.
INDEXES = (
    ("ix_runs_tenant_id_status", ["tenant_id", "status"]),
    ("ix_runs_tenant_id_finished_at", ["tenant_id", "finished_at"]),
    ("ix_runs_tenant_id_created_at", ["tenant_id", "created_at"]),
)


def upgrade() -> None:
    for name, columns in INDEXES:
        op.create_index(name, "runs", columns)


def downgrade() -> None:
    for name, _ in INDEXES:
        op.drop_index(name, "runs")
