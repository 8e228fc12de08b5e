"""The substrate the spec calls existing: principals, agents, sessions, runs, events.

Also creates the deployment's group roles (idempotently; never dropped on downgrade,
because roles are cluster-global) and secures every tenant-owned table with forced
row-level security keyed on the unit of work's transaction-local settings.

Revision ID: 0001_substrate
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001_substrate"
down_revision: str | None = None
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


_SECURE: tuple[str, ...] = (
    """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{owner}') THEN
        CREATE ROLE {owner} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$""",
    """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{api}') THEN
        CREATE ROLE {api} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$""",
    """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{scheduler}') THEN
        CREATE ROLE {scheduler} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$""",
    """
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{maintenance}') THEN
        CREATE ROLE {maintenance} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$""",
    "ALTER TABLE principals OWNER TO {owner}",
    "REVOKE ALL ON principals FROM PUBLIC",
    "ALTER TABLE principals ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE principals FORCE ROW LEVEL SECURITY",
    "ALTER TABLE sessions OWNER TO {owner}",
    "REVOKE ALL ON sessions FROM PUBLIC",
    "ALTER TABLE sessions ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE sessions FORCE ROW LEVEL SECURITY",
    "ALTER TABLE runs OWNER TO {owner}",
    "REVOKE ALL ON runs FROM PUBLIC",
    "ALTER TABLE runs ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE runs FORCE ROW LEVEL SECURITY",
    "ALTER TABLE session_events OWNER TO {owner}",
    "REVOKE ALL ON session_events FROM PUBLIC",
    "ALTER TABLE session_events ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE session_events FORCE ROW LEVEL SECURITY",
    "ALTER TABLE run_checkpoints OWNER TO {owner}",
    "REVOKE ALL ON run_checkpoints FROM PUBLIC",
    "ALTER TABLE run_checkpoints ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE run_checkpoints FORCE ROW LEVEL SECURITY",
    "ALTER TABLE process_events OWNER TO {owner}",
    "REVOKE ALL ON process_events FROM PUBLIC",
    "ALTER TABLE process_events ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE process_events FORCE ROW LEVEL SECURITY",
    "ALTER TABLE agent_versions OWNER TO {owner}",
    "REVOKE ALL ON agent_versions FROM PUBLIC",
    "ALTER TABLE agent_active_versions OWNER TO {owner}",
    "REVOKE ALL ON agent_active_versions FROM PUBLIC",
    _APPEND_ONLY,
    "ALTER FUNCTION scheduling_reject_event_update() OWNER TO {owner}",
    (
        "CREATE TRIGGER session_events_append_only BEFORE UPDATE ON session_events FOR EACH ROW"
        " EXECUTE FUNCTION scheduling_reject_event_update()"
    ),
    (
        "CREATE TRIGGER process_events_append_only BEFORE UPDATE ON process_events FOR EACH ROW"
        " EXECUTE FUNCTION scheduling_reject_event_update()"
    ),
    (
        "CREATE POLICY sessions_api ON sessions AS PERMISSIVE FOR ALL TO {api} USING (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY runs_api ON runs AS PERMISSIVE FOR ALL TO {api} USING (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY process_events_api ON process_events AS PERMISSIVE FOR ALL TO {api} USING"
        " (tenant_id = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY principals_api ON principals AS PERMISSIVE FOR SELECT TO {api} USING"
        " (tenant_id = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY session_events_api ON session_events AS PERMISSIVE FOR ALL TO {api} USING"
        " (EXISTS (SELECT 1 FROM sessions p WHERE p.id = session_events.session_id)) WITH CHECK"
        " (EXISTS (SELECT 1 FROM sessions p WHERE p.id = session_events.session_id))"
    ),
    (
        "CREATE POLICY run_checkpoints_api ON run_checkpoints AS PERMISSIVE FOR ALL TO {api}"
        " USING (EXISTS (SELECT 1 FROM runs p WHERE p.id = run_checkpoints.run_id)) WITH CHECK"
        " (EXISTS (SELECT 1 FROM runs p WHERE p.id = run_checkpoints.run_id))"
    ),
    (
        "CREATE POLICY principals_scheduler ON principals AS PERMISSIVE FOR ALL TO {scheduler}"
        " USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY sessions_scheduler ON sessions AS PERMISSIVE FOR ALL TO {scheduler} USING"
        " (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY runs_scheduler ON runs AS PERMISSIVE FOR ALL TO {scheduler} USING (true)"
        " WITH CHECK (true)"
    ),
    (
        "CREATE POLICY session_events_scheduler ON session_events AS PERMISSIVE FOR ALL TO"
        " {scheduler} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY run_checkpoints_scheduler ON run_checkpoints AS PERMISSIVE FOR ALL TO"
        " {scheduler} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY process_events_scheduler ON process_events AS PERMISSIVE FOR ALL TO"
        " {scheduler} USING (true) WITH CHECK (true)"
    ),
    "GRANT SELECT ON agent_versions, agent_active_versions TO {api}, {scheduler}",
    "GRANT SELECT ON principals TO {api}, {scheduler}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON sessions, runs TO {api}",
    "GRANT SELECT, INSERT, DELETE ON session_events, run_checkpoints TO {api}",
    "GRANT SELECT, INSERT ON process_events TO {api}",
    (
        "GRANT SELECT, INSERT ON sessions, session_events, runs, run_checkpoints, process_events"
        " TO {scheduler}"
    ),
)


def _secure() -> None:
    """Roles, ownership, forced row-level security, the append-only trigger,
    policies and grants."""
    roles = _roles()
    for statement in _SECURE:
        op.execute(statement.format(**roles))


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
