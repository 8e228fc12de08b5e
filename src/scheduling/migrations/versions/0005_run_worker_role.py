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

import re
from collections.abc import Sequence

from alembic import op

revision: str = "0005_run_worker_role"
down_revision: str | None = "0004_admission_window"
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


_UPGRADE: tuple[str, ...] = (
    """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{run_worker}') THEN
        CREATE ROLE {run_worker} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$""",
    (
        "CREATE POLICY sessions_run_worker ON sessions AS PERMISSIVE FOR ALL TO {run_worker}"
        " USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY session_events_run_worker ON session_events AS PERMISSIVE FOR ALL TO"
        " {run_worker} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY runs_run_worker ON runs AS PERMISSIVE FOR ALL TO {run_worker} USING (true)"
        " WITH CHECK (true)"
    ),
    (
        "CREATE POLICY run_checkpoints_run_worker ON run_checkpoints AS PERMISSIVE FOR ALL TO"
        " {run_worker} USING (true) WITH CHECK (true)"
    ),
    (
        "GRANT SELECT ON alembic_version, agent_versions, agent_active_versions, sessions,"
        " session_events, runs, run_checkpoints TO {run_worker}"
    ),
    "GRANT INSERT ON session_events, run_checkpoints TO {run_worker}",
    (
        "GRANT UPDATE (status, lease_owner, lease_expires_at, fencing_token, usage, cost,"
        " failure, updated_at, finished_at) ON runs TO {run_worker}"
    ),
)

_DOWNGRADE: tuple[str, ...] = (
    "DROP POLICY sessions_run_worker ON sessions",
    "DROP POLICY session_events_run_worker ON session_events",
    "DROP POLICY runs_run_worker ON runs",
    "DROP POLICY run_checkpoints_run_worker ON run_checkpoints",
    (
        "REVOKE ALL ON alembic_version, agent_versions, agent_active_versions, sessions,"
        " session_events, runs, run_checkpoints FROM {run_worker}"
    ),
)


def upgrade() -> None:
    roles = _roles()
    for statement in _UPGRADE:
        op.execute(statement.format(**roles))


def downgrade() -> None:
    # Roles are cluster-global and may serve other databases: the role stays.
    roles = _roles()
    for statement in _DOWNGRADE:
        op.execute(statement.format(**roles))
