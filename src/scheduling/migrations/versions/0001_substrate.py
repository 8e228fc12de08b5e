"""The substrate the spec calls existing: principals, agents, sessions, runs, events.

Also creates the deployment's group roles (idempotently; never dropped on downgrade,
because roles are cluster-global) and secures every tenant-owned table with forced
row-level security keyed on the unit of work's transaction-local settings.

Revision ID: 0001_substrate
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from scheduling.adapters.postgres.roles import (
    PRINCIPAL_MATCH,
    create_role_sql,
    parent_visible,
    policy_sql,
    role_names,
    secure_table_sql,
)

revision: str = "0001_substrate"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = postgresql.JSONB(astext_type=sa.Text())
TZ = sa.DateTime(timezone=True)


def _create_tables() -> None:
    op.create_table(
        "principals",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("scopes", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("authority_inputs", JSONB, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "principal_id", name="pk_principals"),
    )
    op.create_table(
        "agent_versions",
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("policy_profile", sa.Text(), nullable=False),
        sa.Column("spec", JSONB, nullable=False),
        sa.Column("limits", JSONB, nullable=False),
        sa.Column("content_hash", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("agent_id", "version", name="pk_agent_versions"),
    )
    op.create_table(
        "agent_active_versions",
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Text(), nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id", "version"],
            ["agent_versions.agent_id", "agent_versions.version"],
            name="fk_agent_active_versions_agent_version",
        ),
        sa.PrimaryKeyConstraint("agent_id", name="pk_agent_active_versions"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("agent_version", sa.Text(), nullable=False),
        sa.Column("metadata", JSONB, nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id", "agent_version"],
            ["agent_versions.agent_id", "agent_versions.version"],
            name="fk_sessions_agent_version",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_sessions"),
    )
    op.create_index(
        "ix_sessions_tenant_id_principal_id_updated_at",
        "sessions",
        ["tenant_id", "principal_id", "updated_at"],
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.UUID(), nullable=False),
        sa.Column("agent_id", sa.UUID(), nullable=False),
        sa.Column("agent_version", sa.Text(), nullable=False),
        sa.Column("policy_profile", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("scheduled_for", TZ, nullable=False),
        sa.Column("requested_scopes", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("limits", JSONB, nullable=False),
        sa.Column("deadline_at", TZ, nullable=True),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", TZ, nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("usage", JSONB, nullable=False),
        sa.Column("cost", sa.Numeric(precision=18, scale=6), nullable=False),
        sa.Column("failure", JSONB, nullable=True),
        sa.Column("metadata", JSONB, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("finished_at", TZ, nullable=True),
        sa.CheckConstraint(
            "status IN ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED')",
            name=op.f("ck_runs_status_known"),
        ),
        sa.CheckConstraint(
            "(lease_owner IS NULL) = (lease_expires_at IS NULL)",
            name=op.f("ck_runs_lease_complete"),
        ),
        sa.CheckConstraint("fencing_token >= 0", name=op.f("ck_runs_fencing_token_nonnegative")),
        sa.ForeignKeyConstraint(
            ["agent_id", "agent_version"],
            ["agent_versions.agent_id", "agent_versions.version"],
            name="fk_runs_agent_version",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"], ["sessions.id"], name="fk_runs_session_id_sessions", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_session_id", "runs", ["session_id"])
    op.create_index(
        "ix_runs_status_priority_scheduled_for", "runs", ["status", "priority", "scheduled_for"]
    )
    op.create_index(
        "ix_runs_tenant_id_principal_id_created_at",
        "runs",
        ["tenant_id", "principal_id", "created_at"],
    )
    op.create_table(
        "session_events",
        sa.Column("session_id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("context_only", sa.Boolean(), nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("occurred_at", TZ, nullable=False),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_session_events_seq_positive")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_session_events_run_id_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_session_events_session_id_sessions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_session_events"),
    )
    op.create_index("ix_session_events_run_id", "session_events", ["run_id"])
    op.create_table(
        "run_checkpoints",
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.CheckConstraint("seq >= 0", name=op.f("ck_run_checkpoints_seq_nonnegative")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_run_checkpoints_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_checkpoints"),
    )
    op.create_table(
        "process_events",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("schedule_id", sa.UUID(), nullable=True),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("occurred_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_process_events"),
    )
    op.create_index(
        "ix_process_events_schedule_id_occurred_at",
        "process_events",
        ["schedule_id", "occurred_at"],
    )
    op.create_index(
        "ix_process_events_tenant_id_principal_id_occurred_at",
        "process_events",
        ["tenant_id", "principal_id", "occurred_at"],
    )


# Event logs are append-only: no role may rewrite history.
_APPEND_ONLY = """
CREATE FUNCTION scheduling_reject_event_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'event logs are append-only' USING ERRCODE = 'insufficient_privilege';
END
$$"""


def _secure() -> None:
    roles = role_names()
    for role in roles.all():
        op.execute(create_role_sql(role))
    tenant_tables = ["principals", "sessions", "runs", "session_events", "run_checkpoints"]
    tenant_tables.append("process_events")
    for table in tenant_tables:
        for statement in secure_table_sql(table, roles.owner):
            op.execute(statement)
    for table in ("agent_versions", "agent_active_versions"):
        op.execute(f"ALTER TABLE {table} OWNER TO {roles.owner}")
        op.execute(f"REVOKE ALL ON {table} FROM PUBLIC")

    op.execute(_APPEND_ONLY)
    op.execute(f"ALTER FUNCTION scheduling_reject_event_update() OWNER TO {roles.owner}")
    for table in ("session_events", "process_events"):
        op.execute(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION scheduling_reject_event_update()"
        )

    api, sched = roles.api, roles.scheduler
    # API role: one principal's rows only.
    for table in ("sessions", "runs", "process_events"):
        op.execute(policy_sql(table, f"{table}_api", api, PRINCIPAL_MATCH))
    op.execute(policy_sql("principals", "principals_api", api, PRINCIPAL_MATCH, "SELECT"))
    session_child = parent_visible("sessions", "id", "session_events.session_id")
    op.execute(policy_sql("session_events", "session_events_api", api, session_child))
    run_child = parent_visible("runs", "id", "run_checkpoints.run_id")
    op.execute(policy_sql("run_checkpoints", "run_checkpoints_api", api, run_child))
    # Scheduler role: the due scan and the principal directory are cross-tenant by nature;
    # its privileges (not its rows) are what is least.
    for table in tenant_tables:
        op.execute(policy_sql(table, f"{table}_scheduler", sched, "true"))

    op.execute(f"GRANT SELECT ON agent_versions, agent_active_versions TO {api}, {sched}")
    op.execute(f"GRANT SELECT ON principals TO {api}, {sched}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, runs TO {api}")
    op.execute(f"GRANT SELECT, INSERT, DELETE ON session_events, run_checkpoints TO {api}")
    op.execute(f"GRANT SELECT, INSERT ON process_events TO {api}")
    op.execute(
        "GRANT SELECT, INSERT ON sessions, session_events, runs, run_checkpoints,"
        f" process_events TO {sched}"
    )


def upgrade() -> None:
    _create_tables()
    _secure()


def downgrade() -> None:
    # Roles are cluster-global and may serve other databases: they stay.
    for table in ("session_events", "process_events"):
        op.execute(f"DROP TRIGGER {table}_append_only ON {table}")
    op.execute("DROP FUNCTION scheduling_reject_event_update()")
    op.drop_index("ix_process_events_tenant_id_principal_id_occurred_at", "process_events")
    op.drop_index("ix_process_events_schedule_id_occurred_at", "process_events")
    op.drop_table("process_events")
    op.drop_table("run_checkpoints")
    op.drop_index("ix_session_events_run_id", "session_events")
    op.drop_table("session_events")
    op.drop_index("ix_runs_tenant_id_principal_id_created_at", "runs")
    op.drop_index("ix_runs_status_priority_scheduled_for", "runs")
    op.drop_index("ix_runs_session_id", "runs")
    op.drop_table("runs")
    op.drop_index("ix_sessions_tenant_id_principal_id_updated_at", "sessions")
    op.drop_table("sessions")
    op.drop_table("agent_active_versions")
    op.drop_table("agent_versions")
    op.drop_table("principals")
