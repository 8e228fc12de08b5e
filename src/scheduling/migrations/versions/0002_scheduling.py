"""Milestone 11's four scheduling tables, their constraints, indexes, policies and grants.

Revision ID: 0002_scheduling
Revises: 0001_substrate
Create Date: 2026-11-30
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002_scheduling"
down_revision: str | None = "0001_substrate"
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

_LIVE = "session_id IS NOT NULL AND run_id IS NOT NULL AND links_erased_at IS NULL"
_ERASED = "session_id IS NULL AND run_id IS NULL AND links_erased_at IS NOT NULL"


def _create_tables() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("pause_reason", sa.Text(), nullable=True),
        sa.Column("current_revision", sa.Integer(), nullable=False),
        sa.Column("next_fire_at", TZ, nullable=True),
        sa.Column(
            "consecutive_failures", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.CheckConstraint(
            "state IN ('ACTIVE', 'PAUSED', 'COMPLETED', 'CANCELLED')",
            name=op.f("ck_schedules_state_known"),
        ),
        sa.CheckConstraint(
            "(state = 'PAUSED' AND pause_reason IS NOT NULL"
            " AND pause_reason IN ('user', 'failure_limit'))"
            " OR (state <> 'PAUSED' AND pause_reason IS NULL)",
            name=op.f("ck_schedules_pause_reason_matches_state"),
        ),
        sa.CheckConstraint(
            "current_revision >= 1", name=op.f("ck_schedules_current_revision_positive")
        ),
        sa.CheckConstraint(
            "consecutive_failures >= 0", name=op.f("ck_schedules_consecutive_failures_nonnegative")
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedules"),
    )
    op.create_index("ix_schedules_state_next_fire_at", "schedules", ["state", "next_fire_at"])
    op.create_index(
        "ix_schedules_tenant_id_principal_id_updated_at_id",
        "schedules",
        ["tenant_id", "principal_id", "updated_at", "id"],
    )
    op.create_index(
        "ix_schedules_terminal_retention",
        "schedules",
        ["tenant_id", "updated_at", "id"],
        postgresql_where=sa.text("state IN ('COMPLETED', 'CANCELLED')"),
    )
    op.create_table(
        "schedule_revisions",
        sa.Column("schedule_id", sa.UUID(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("definition", JSONB, nullable=False),
        sa.Column("created_by_principal_id", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.CheckConstraint(
            "jsonb_typeof(definition) = 'object'",
            name=op.f("ck_schedule_revisions_definition_object"),
        ),
        sa.CheckConstraint("revision >= 1", name=op.f("ck_schedule_revisions_revision_positive")),
        sa.ForeignKeyConstraint(
            ["schedule_id"], ["schedules.id"], name="fk_schedule_revisions_schedule_id_schedules"
        ),
        sa.PrimaryKeyConstraint("schedule_id", "revision", name="pk_schedule_revisions"),
    )
    # The current revision must exist; deferred so a schedule and its revision 1 can be
    # inserted in either order inside one transaction.
    op.create_foreign_key(
        "fk_schedules_current_revision",
        "schedules",
        "schedule_revisions",
        ["id", "current_revision"],
        ["schedule_id", "revision"],
        deferrable=True,
        initially="DEFERRED",
    )
    op.create_table(
        "schedule_occurrences",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("schedule_id", sa.UUID(), nullable=False),
        sa.Column("schedule_revision", sa.Integer(), nullable=False),
        sa.Column("nominal_fire_at", TZ, nullable=False),
        sa.Column("disposition", sa.Text(), nullable=False),
        sa.Column("session_id", sa.UUID(), nullable=True),
        sa.Column("run_id", sa.UUID(), nullable=True),
        sa.Column("reason_code", sa.Text(), nullable=True),
        sa.Column("authority_version", sa.Text(), nullable=True),
        sa.Column("materialized_at", TZ, nullable=True),
        sa.Column("links_erased_at", TZ, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.CheckConstraint(
            "disposition IN ('MATERIALIZED', 'MISSED', 'SKIPPED_OVERLAP',"
            " 'AUTHORIZATION_FAILED', 'CONFIGURATION_FAILED')",
            name=op.f("ck_schedule_occurrences_disposition_known"),
        ),
        sa.CheckConstraint(
            "disposition <> 'MATERIALIZED' OR (materialized_at IS NOT NULL"
            " AND authority_version IS NOT NULL AND reason_code IS NULL"
            f" AND (({_LIVE}) OR ({_ERASED})))",
            name=op.f("ck_schedule_occurrences_materialized_links"),
        ),
        sa.CheckConstraint(
            "disposition = 'MATERIALIZED' OR (session_id IS NULL AND run_id IS NULL"
            " AND links_erased_at IS NULL AND materialized_at IS NULL"
            " AND reason_code IS NOT NULL)",
            name=op.f("ck_schedule_occurrences_unlinked_dispositions"),
        ),
        sa.CheckConstraint(
            "materialized_at IS NULL OR materialized_at >= nominal_fire_at",
            name=op.f("ck_schedule_occurrences_not_early"),
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name="fk_schedule_occurrences_schedule_id_schedules",
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id", "schedule_revision"],
            ["schedule_revisions.schedule_id", "schedule_revisions.revision"],
            name="fk_schedule_occurrences_revision",
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name="fk_schedule_occurrences_session_id_sessions",
            ondelete="SET NULL",
            initially="DEFERRED",
            deferrable=True,
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
            name="fk_schedule_occurrences_run_id_runs",
            ondelete="SET NULL",
            initially="DEFERRED",
            deferrable=True,
        ),
        sa.PrimaryKeyConstraint("id", name="pk_schedule_occurrences"),
        sa.UniqueConstraint(
            "schedule_id",
            "nominal_fire_at",
            name="uq_schedule_occurrences_schedule_id_nominal_fire_at",
        ),
    )
    op.create_index(
        "ix_schedule_occurrences_history",
        "schedule_occurrences",
        ["schedule_id", sa.literal_column("nominal_fire_at DESC")],
    )
    op.create_index(
        "uq_schedule_occurrences_run_id",
        "schedule_occurrences",
        ["run_id"],
        unique=True,
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.create_index(
        "uq_schedule_occurrences_session_id",
        "schedule_occurrences",
        ["session_id"],
        unique=True,
        postgresql_where=sa.text("session_id IS NOT NULL"),
    )
    op.create_table(
        "schedule_idempotency_keys",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("principal_id", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("request_hash", sa.Text(), nullable=False),
        sa.Column("schedule_id", sa.UUID(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name="fk_schedule_idempotency_keys_schedule_id_schedules",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "principal_id", "key", name="pk_schedule_idempotency_keys"
        ),
    )
    op.create_index(
        "ix_schedule_idempotency_keys_schedule_id", "schedule_idempotency_keys", ["schedule_id"]
    )


# Revisions are immutable: nobody may rewrite one.
_IMMUTABLE = """
CREATE FUNCTION scheduling_reject_revision_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'schedule revisions are immutable' USING ERRCODE = 'insufficient_privilege';
END
$$"""


_SECURE: tuple[str, ...] = (
    "ALTER TABLE schedules OWNER TO {owner}",
    "REVOKE ALL ON schedules FROM PUBLIC",
    "ALTER TABLE schedules ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE schedules FORCE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_revisions OWNER TO {owner}",
    "REVOKE ALL ON schedule_revisions FROM PUBLIC",
    "ALTER TABLE schedule_revisions ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_revisions FORCE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_occurrences OWNER TO {owner}",
    "REVOKE ALL ON schedule_occurrences FROM PUBLIC",
    "ALTER TABLE schedule_occurrences ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_occurrences FORCE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_idempotency_keys OWNER TO {owner}",
    "REVOKE ALL ON schedule_idempotency_keys FROM PUBLIC",
    "ALTER TABLE schedule_idempotency_keys ENABLE ROW LEVEL SECURITY",
    "ALTER TABLE schedule_idempotency_keys FORCE ROW LEVEL SECURITY",
    _IMMUTABLE,
    "ALTER FUNCTION scheduling_reject_revision_update() OWNER TO {owner}",
    (
        "CREATE TRIGGER schedule_revisions_immutable BEFORE UPDATE ON schedule_revisions FOR EACH"
        " ROW EXECUTE FUNCTION scheduling_reject_revision_update()"
    ),
    (
        "CREATE POLICY schedules_api ON schedules AS PERMISSIVE FOR ALL TO {api} USING (tenant_id"
        " = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY schedule_idempotency_keys_api ON schedule_idempotency_keys AS PERMISSIVE"
        " FOR ALL TO {api} USING (tenant_id = current_setting('scheduling.tenant_id', true) AND"
        " principal_id = current_setting('scheduling.principal_id', true)) WITH CHECK (tenant_id"
        " = current_setting('scheduling.tenant_id', true) AND principal_id ="
        " current_setting('scheduling.principal_id', true))"
    ),
    (
        "CREATE POLICY schedule_revisions_api ON schedule_revisions AS PERMISSIVE FOR ALL TO"
        " {api} USING (EXISTS (SELECT 1 FROM schedules p WHERE p.id ="
        " schedule_revisions.schedule_id)) WITH CHECK (EXISTS (SELECT 1 FROM schedules p WHERE"
        " p.id = schedule_revisions.schedule_id))"
    ),
    (
        "CREATE POLICY schedule_occurrences_api ON schedule_occurrences AS PERMISSIVE FOR ALL TO"
        " {api} USING (EXISTS (SELECT 1 FROM schedules p WHERE p.id ="
        " schedule_occurrences.schedule_id)) WITH CHECK (EXISTS (SELECT 1 FROM schedules p WHERE"
        " p.id = schedule_occurrences.schedule_id))"
    ),
    (
        "CREATE POLICY schedules_scheduler ON schedules AS PERMISSIVE FOR ALL TO {scheduler}"
        " USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY schedule_revisions_scheduler ON schedule_revisions AS PERMISSIVE FOR ALL"
        " TO {scheduler} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY schedule_occurrences_scheduler ON schedule_occurrences AS PERMISSIVE FOR"
        " ALL TO {scheduler} USING (true) WITH CHECK (true)"
    ),
    (
        "CREATE POLICY schedules_maintenance ON schedules AS PERMISSIVE FOR ALL TO {maintenance}"
        " USING (tenant_id = current_setting('scheduling.tenant_id', true)) WITH CHECK (tenant_id"
        " = current_setting('scheduling.tenant_id', true))"
    ),
    (
        "CREATE POLICY schedule_idempotency_keys_maintenance ON schedule_idempotency_keys AS"
        " PERMISSIVE FOR ALL TO {maintenance} USING (tenant_id ="
        " current_setting('scheduling.tenant_id', true)) WITH CHECK (tenant_id ="
        " current_setting('scheduling.tenant_id', true))"
    ),
    (
        "CREATE POLICY schedule_revisions_maintenance ON schedule_revisions AS PERMISSIVE FOR ALL"
        " TO {maintenance} USING (EXISTS (SELECT 1 FROM schedules p WHERE p.id ="
        " schedule_revisions.schedule_id)) WITH CHECK (EXISTS (SELECT 1 FROM schedules p WHERE"
        " p.id = schedule_revisions.schedule_id))"
    ),
    (
        "CREATE POLICY schedule_occurrences_maintenance ON schedule_occurrences AS PERMISSIVE FOR"
        " ALL TO {maintenance} USING (EXISTS (SELECT 1 FROM schedules p WHERE p.id ="
        " schedule_occurrences.schedule_id)) WITH CHECK (EXISTS (SELECT 1 FROM schedules p WHERE"
        " p.id = schedule_occurrences.schedule_id))"
    ),
    "GRANT SELECT, INSERT, UPDATE ON schedules TO {api}",
    "GRANT SELECT, INSERT ON schedule_revisions, schedule_idempotency_keys TO {api}",
    "GRANT SELECT ON schedule_occurrences TO {api}",
    "GRANT UPDATE (session_id, run_id, links_erased_at) ON schedule_occurrences TO {api}",
    "GRANT SELECT ON schedules, schedule_revisions TO {scheduler}",
    (
        "GRANT UPDATE (state, pause_reason, next_fire_at, consecutive_failures, updated_at) ON"
        " schedules TO {scheduler}"
    ),
    "GRANT SELECT, INSERT ON schedule_occurrences TO {scheduler}",
    (
        "GRANT SELECT, DELETE ON schedules, schedule_revisions, schedule_occurrences,"
        " schedule_idempotency_keys TO {maintenance}"
    ),
    "GRANT UPDATE (updated_at) ON schedules TO {maintenance}",
    "GRANT SELECT ON alembic_version TO {api}, {scheduler}, {maintenance}",
)


def _secure() -> None:
    """Ownership, forced row-level security, the immutable-revision trigger,
    policies and grants."""
    roles = _roles()
    for statement in _SECURE:
        op.execute(statement.format(**roles))


def upgrade() -> None:
    _create_tables()
    _secure()


def downgrade() -> None:
    revoke = "REVOKE ALL ON alembic_version FROM {api}, {scheduler}, {maintenance}"
    op.execute(revoke.format(**_roles()))
    op.execute("DROP TRIGGER schedule_revisions_immutable ON schedule_revisions")
    op.execute("DROP FUNCTION scheduling_reject_revision_update()")
    op.drop_index("ix_schedule_idempotency_keys_schedule_id", "schedule_idempotency_keys")
    op.drop_table("schedule_idempotency_keys")
    op.drop_index("uq_schedule_occurrences_session_id", "schedule_occurrences")
    op.drop_index("uq_schedule_occurrences_run_id", "schedule_occurrences")
    op.drop_index("ix_schedule_occurrences_history", "schedule_occurrences")
    op.drop_table("schedule_occurrences")
    op.drop_constraint("fk_schedules_current_revision", "schedules", type_="foreignkey")
    op.drop_table("schedule_revisions")
    op.drop_index("ix_schedules_terminal_retention", "schedules")
    op.drop_index("ix_schedules_state_next_fire_at", "schedules")
    op.drop_index("ix_schedules_tenant_id_principal_id_updated_at_id", "schedules")
    op.drop_table("schedules")
