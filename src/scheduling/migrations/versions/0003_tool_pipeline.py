"""The governed tool pipeline's durable records (invocations, approval requests, decisions)
and the outcome outbox (``schedule_outbox``).

Rows are principal-scoped (forced row-level security, the API role sees one
principal's rows). They hold hashes, states, reason codes and bounded tool outputs,
never tool arguments.

Revision ID: 0003_tool_pipeline
Revises: 0002_scheduling
Create Date: 2026-12-01
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_tool_pipeline"
down_revision: str | None = "0002_scheduling"
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
_STATES = "'AWAITING_APPROVAL', 'APPROVED', 'DENIED', 'SUCCEEDED', 'FAILED'"


def _create_tables() -> None:
    op.create_table(
        "tool_invocations",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("tool_name", sa.Text(), nullable=False),
        sa.Column("tool_version", sa.Text(), nullable=False),
        sa.Column("arguments_hash", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("session_id", sa.UUID(), nullable=True),
        sa.Column("reason_code", sa.Text(), nullable=True),
        sa.Column("output", JSONB, nullable=True),
        sa.Column("output_bytes", sa.Integer(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.CheckConstraint(f"state IN ({_STATES})", name="ck_tool_invocations_state_known"),
        sa.CheckConstraint(
            "output_bytes IS NULL OR output_bytes >= 0",
            name="ck_tool_invocations_output_bytes_non_negative",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_tool_invocations"),
    )
    op.create_index(
        "uq_tool_invocations_idempotency_key",
        "tool_invocations",
        ["tenant_id", "principal_id", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL"),
    )
    op.create_table(
        "tool_approval_requests",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("invocation_id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("view_hash", sa.Text(), nullable=False),
        sa.Column("requested_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["invocation_id"],
            ["tool_invocations.id"],
            name="fk_tool_approval_requests_invocation_id_tool_invocations",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_tool_approval_requests"),
        sa.UniqueConstraint("invocation_id", name="uq_tool_approval_requests_invocation_id"),
    )
    op.create_table(
        "tool_approval_decisions",
        sa.Column("approval_id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("approved", sa.Boolean(), nullable=False),
        sa.Column("decided_by", sa.Text(), nullable=False),
        sa.Column("decided_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["approval_id"],
            ["tool_approval_requests.id"],
            name="fk_tool_approval_decisions_approval_id_tool_approval_requests",
        ),
        sa.PrimaryKeyConstraint("approval_id", name="pk_tool_approval_decisions"),
    )


def _create_outbox() -> None:
    op.create_table(
        "schedule_outbox",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("schedule_id", sa.UUID(), nullable=False),
        sa.Column("occurrence_id", sa.UUID(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("delivered_at", TZ, nullable=True),
        sa.CheckConstraint(
            "kind IN ('schedule_run_finished')", name="ck_schedule_outbox_kind_known"
        ),
        sa.CheckConstraint(
            "jsonb_typeof(payload) = 'object'", name="ck_schedule_outbox_payload_object"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedule_outbox"),
    )
    op.create_index(
        "ix_schedule_outbox_pending",
        "schedule_outbox",
        ["created_at", "id"],
        postgresql_where=sa.text("delivered_at IS NULL"),
    )


_SECURE_OUTBOX: tuple[str, ...] = (
    "ALTER TABLE schedule_outbox OWNER TO {owner}",
    "REVOKE ALL ON schedule_outbox FROM PUBLIC",
    "ALTER TABLE schedule_outbox ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_outbox FORCE ROW LEVEL SECURITY",
    (
        "CREATE POLICY schedule_outbox_scheduler ON schedule_outbox AS PERMISSIVE FOR ALL TO"
        " {scheduler} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY schedule_outbox_api ON schedule_outbox AS PERMISSIVE FOR ALL TO {api}"
        " USING (tenant_id = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY schedule_outbox_maintenance ON schedule_outbox AS PERMISSIVE FOR ALL TO"
        " {maintenance} USING (tenant_id = current_setting('scheduling.tenant_id', true)) WITH"
        " CHECK (tenant_id = current_setting('scheduling.tenant_id', true))"
    ),
    "GRANT SELECT, INSERT ON schedule_outbox TO {scheduler}",
    "GRANT UPDATE (delivered_at) ON schedule_outbox TO {scheduler}",
    "GRANT SELECT ON schedule_outbox TO {api}",
    "GRANT SELECT, DELETE ON schedule_outbox TO {maintenance}",
)


def _secure_outbox() -> None:
    """The scheduler appends (accounting, decisions) and drains; the API role may
    read its own principal's rows; maintenance purges one tenant's."""
    roles = _roles()
    for statement in _SECURE_OUTBOX:
        op.execute(statement.format(**roles))


_SECURE: tuple[str, ...] = (
    "ALTER TABLE tool_invocations OWNER TO {owner}",
    "REVOKE ALL ON tool_invocations FROM PUBLIC",
    "ALTER TABLE tool_invocations ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE tool_invocations FORCE ROW LEVEL SECURITY",
    (
        "CREATE POLICY tool_invocations_api ON tool_invocations AS PERMISSIVE FOR ALL TO {api}"
        " USING (tenant_id = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY tool_invocations_maintenance ON tool_invocations AS PERMISSIVE FOR ALL TO"
        " {maintenance} USING (tenant_id = current_setting('scheduling.tenant_id', true)) WITH"
        " CHECK (tenant_id = current_setting('scheduling.tenant_id', true))"
    ),
    "ALTER TABLE tool_approval_requests OWNER TO {owner}",
    "REVOKE ALL ON tool_approval_requests FROM PUBLIC",
    "ALTER TABLE tool_approval_requests ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE tool_approval_requests FORCE ROW LEVEL SECURITY",
    (
        "CREATE POLICY tool_approval_requests_api ON tool_approval_requests AS PERMISSIVE FOR ALL"
        " TO {api} USING (tenant_id = current_setting('scheduling.tenant_id', true) AND"
        " principal_id = current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id"
        " = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY tool_approval_requests_maintenance ON tool_approval_requests AS PERMISSIVE"
        " FOR ALL TO {maintenance} USING (tenant_id = current_setting('scheduling.tenant_id',"
        " true)) WITH CHECK (tenant_id = current_setting('scheduling.tenant_id', true))"
    ),
    "ALTER TABLE tool_approval_decisions OWNER TO {owner}",
    "REVOKE ALL ON tool_approval_decisions FROM PUBLIC",
    "ALTER TABLE tool_approval_decisions ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE tool_approval_decisions FORCE ROW LEVEL SECURITY",
    (
        "CREATE POLICY tool_approval_decisions_api ON tool_approval_decisions AS PERMISSIVE FOR"
        " ALL TO {api} USING (tenant_id = current_setting('scheduling.tenant_id', true) AND"
        " principal_id = current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id"
        " = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY tool_approval_decisions_maintenance ON tool_approval_decisions AS"
        " PERMISSIVE FOR ALL TO {maintenance} USING (tenant_id ="
        " current_setting('scheduling.tenant_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true))"
    ),
    "GRANT SELECT, INSERT ON tool_invocations TO {api}",
    (
        "GRANT UPDATE (state, reason_code, output, output_bytes, updated_at) ON tool_invocations"
        " TO {api}"
    ),
    "GRANT SELECT, INSERT ON tool_approval_requests, tool_approval_decisions TO {api}",
    (
        "GRANT SELECT, DELETE ON tool_invocations, tool_approval_requests,"
        " tool_approval_decisions TO {maintenance}"
    ),
)


def _secure() -> None:
    """The API role (where conversations run) sees one principal's rows;
    maintenance may purge one tenant's rows per transaction."""
    roles = _roles()
    for statement in _SECURE:
        op.execute(statement.format(**roles))


def upgrade() -> None:
    _create_tables()
    _secure()
    _create_outbox()
    _secure_outbox()


def downgrade() -> None:
    op.drop_index("ix_schedule_outbox_pending", "schedule_outbox")
    op.drop_table("schedule_outbox")
    op.drop_table("tool_approval_decisions")
    op.drop_table("tool_approval_requests")
    op.drop_index("uq_tool_invocations_idempotency_key", "tool_invocations")
    op.drop_table("tool_invocations")
