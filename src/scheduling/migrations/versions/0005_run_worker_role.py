"""The run worker's least-privilege group role: claim, heartbeat, checkpoint, finish.

Revision ID: 0005_run_worker_role
Revises: 0002_scheduling
Create Date: 2026-12-01

The run worker reads runs, their sessions' events, checkpoints and agent versions,
and writes only what a lease holder writes: the run's mutable columns (status, lease,
fencing token, usage, cost, failure, timestamps), checkpoints and session events.
Like the scheduler it works across tenants (row policy ``true``); its privileges are
what is least. It has no access to schedules, occurrences, principals or process
events: post-run accounting stays with the scheduler's sweep.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from scheduling.adapters.postgres.roles import (
    RUN_MUTABLE_COLUMNS,
    create_role_sql,
    policy_sql,
    role_names,
)

revision: str = "0005_run_worker_role"
down_revision: str | None = "0004_admission_window"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_POLICY_TABLES = ("sessions", "session_events", "runs", "run_checkpoints")


def upgrade() -> None:
    roles = role_names()
    worker = roles.run_worker
    op.execute(create_role_sql(worker))
    for table in _POLICY_TABLES:
        op.execute(policy_sql(table, f"{table}_run_worker", worker, "true"))
    op.execute(
        "GRANT SELECT ON alembic_version, agent_versions, agent_active_versions, sessions,"
        f" session_events, runs, run_checkpoints TO {worker}"
    )
    op.execute(f"GRANT INSERT ON session_events, run_checkpoints TO {worker}")
    op.execute(f"GRANT UPDATE ({', '.join(RUN_MUTABLE_COLUMNS)}) ON runs TO {worker}")


def downgrade() -> None:
    # Roles are cluster-global and may serve other databases: the role stays.
    worker = role_names().run_worker
    for table in _POLICY_TABLES:
        op.execute(f"DROP POLICY {table}_run_worker ON {table}")
    op.execute(
        "REVOKE ALL ON alembic_version, agent_versions, agent_active_versions, sessions,"
        f" session_events, runs, run_checkpoints FROM {worker}"
    )
