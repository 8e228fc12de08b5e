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

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_run_claim_facts"
down_revision: str | None = "0005_run_worker_role"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_ROLE_PREFIX = "scheduling.role_prefix"


def _roles() -> dict[str, str]:
    """The deployment's group roles, ``<prefix>_owner`` and so on. The prefix is the
    migration parameter ``scheduling.role_prefix`` (env.py sets it; role names are
    deployment configuration, ADR 2161); the SQL is this revision's own, frozen."""
    config = op.get_context().config
    prefix = config.attributes.get(_ROLE_PREFIX) if config is not None else None
    if not isinstance(prefix, str) or not re.fullmatch(r"[a-z_][a-z0-9_]{0,40}", prefix):
        raise ValueError(f"migration parameter {_ROLE_PREFIX} is not a role prefix: {prefix!r}")
    kinds = ("owner", "api", "scheduler", "maintenance", "run_worker")
    return {kind: f"{prefix}_{kind}" for kind in kinds}


def upgrade() -> None:
    op.add_column("runs", sa.Column("first_claimed_at", sa.DateTime(timezone=True)))
    op.add_column(
        "runs",
        sa.Column("lease_reclaims", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.execute(
        "GRANT UPDATE (first_claimed_at, lease_reclaims) ON runs TO {run_worker}".format(**_roles())
    )


def downgrade() -> None:
    # Dropping the columns drops their column privileges with them.
    op.drop_column("runs", "lease_reclaims")
    op.drop_column("runs", "first_claimed_at")
