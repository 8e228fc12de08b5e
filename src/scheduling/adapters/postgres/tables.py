"""The one SQLAlchemy metadata of the schema. The migration chain must equal it exactly.

Two layers, matching the two migrations:

* the substrate the spec calls "existing" (principals, agent versions, sessions,
  session events, runs, run checkpoints, process events);
* the scheduling tables of the spec's "Persistence" section.

Constraints that autogenerate cannot compare (CHECKs, row-level security, grants)
are verified by catalog inspection in ``scheduling.adapters.postgres.inspection``.
Every timestamp is written from a Clock-supplied parameter; no column defaults
to ``now()``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

RUN_STATUSES = ("QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
SCHEDULE_STATES = ("ACTIVE", "PAUSED", "COMPLETED", "CANCELLED")
PAUSE_REASONS = ("user", "failure_limit")
DISPOSITIONS = (
    "MATERIALIZED",
    "MISSED",
    "SKIPPED_OVERLAP",
    "AUTHORIZATION_FAILED",
    "CONFIGURATION_FAILED",
)
UNLINKED_DISPOSITIONS = DISPOSITIONS[1:]


def _in(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"


def _tz(name: str, nullable: bool = False) -> Column[datetime]:
    return Column(name, DateTime(timezone=True), nullable=nullable)


# --------------------------------------------------------------------------- substrate

principals = Table(
    "principals",
    metadata,
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("scopes", ARRAY(Text), nullable=False),
    # Non-secret inputs to the content-derived authority version (roles, groups, ...).
    Column("authority_inputs", JSONB, nullable=False),
    _tz("created_at"),
    _tz("updated_at"),
    PrimaryKeyConstraint("tenant_id", "principal_id"),
)

agent_versions = Table(
    "agent_versions",
    metadata,
    Column("agent_id", UUID(as_uuid=True), nullable=False),
    Column("version", Text, nullable=False),
    Column("policy_profile", Text, nullable=False),
    # The canonical AgentSpec (tools, instructions, model) and its default limits.
    Column("spec", JSONB, nullable=False),
    Column("limits", JSONB, nullable=False),
    Column("content_hash", Text, nullable=False),
    _tz("created_at"),
    PrimaryKeyConstraint("agent_id", "version"),
)

# The floating "active" pointer: which version new interactive sessions use.
agent_active_versions = Table(
    "agent_active_versions",
    metadata,
    Column("agent_id", UUID(as_uuid=True), nullable=False),
    Column("version", Text, nullable=False),
    _tz("updated_at"),
    PrimaryKeyConstraint("agent_id"),
    ForeignKeyConstraint(
        ["agent_id", "version"],
        ["agent_versions.agent_id", "agent_versions.version"],
        name="fk_agent_active_versions_agent_version",
    ),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("agent_id", UUID(as_uuid=True), nullable=False),
    Column("agent_version", Text, nullable=False),
    # Platform metadata; ``schedule_id`` is reserved for the materializer.
    Column("metadata", JSONB, nullable=False),
    Column("title", Text, nullable=True),
    _tz("created_at"),
    _tz("updated_at"),
    PrimaryKeyConstraint("id"),
    ForeignKeyConstraint(
        ["agent_id", "agent_version"],
        ["agent_versions.agent_id", "agent_versions.version"],
        name="fk_sessions_agent_version",
    ),
    Index(
        "ix_sessions_tenant_id_principal_id_updated_at", "tenant_id", "principal_id", "updated_at"
    ),
)

runs = Table(
    "runs",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("session_id", UUID(as_uuid=True), nullable=False),
    Column("agent_id", UUID(as_uuid=True), nullable=False),
    Column("agent_version", Text, nullable=False),
    Column("policy_profile", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    _tz("scheduled_for"),
    Column("requested_scopes", ARRAY(Text), nullable=False),
    Column("limits", JSONB, nullable=False),
    _tz("deadline_at", nullable=True),
    Column("lease_owner", Text, nullable=True),
    _tz("lease_expires_at", nullable=True),
    Column("fencing_token", BigInteger, nullable=False),
    Column("usage", JSONB, nullable=False),
    Column("cost", Numeric(18, 6), nullable=False),
    # Sanitized failure classification (reason, error class, provider facts); no message.
    Column("failure", JSONB, nullable=True),
    # Creation payload facts such as schedule linkage (schedule_id, occurrence_id, ...).
    Column("metadata", JSONB, nullable=False),
    _tz("created_at"),
    _tz("updated_at"),
    _tz("finished_at", nullable=True),
    # Claim facts (revision 0006, ADR 1512): the first claim's instant and the claims
    # of an expired lease, for claim latency per lane and lease reclaims.
    _tz("first_claimed_at", nullable=True),
    Column("lease_reclaims", Integer, nullable=False, server_default=text("0")),
    PrimaryKeyConstraint("id"),
    ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
    ForeignKeyConstraint(
        ["agent_id", "agent_version"],
        ["agent_versions.agent_id", "agent_versions.version"],
        name="fk_runs_agent_version",
    ),
    CheckConstraint(_in("status", RUN_STATUSES), name="status_known"),
    CheckConstraint("fencing_token >= 0", name="fencing_token_nonnegative"),
    CheckConstraint("(lease_owner IS NULL) = (lease_expires_at IS NULL)", name="lease_complete"),
    Index("ix_runs_status_priority_scheduled_for", "status", "priority", "scheduled_for"),
    Index("ix_runs_session_id", "session_id"),
    Index("ix_runs_tenant_id_principal_id_created_at", "tenant_id", "principal_id", "created_at"),
)

session_events = Table(
    "session_events",
    metadata,
    Column("session_id", UUID(as_uuid=True), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("run_id", UUID(as_uuid=True), nullable=True),
    Column("event_type", Text, nullable=False),
    Column("actor", Text, nullable=False),
    # True for the scheduler's seed: durable model context, not a chat message.
    Column("context_only", Boolean, nullable=False),
    Column("payload", JSONB, nullable=False),
    _tz("occurred_at"),
    PrimaryKeyConstraint("session_id", "seq"),
    ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
    ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    CheckConstraint("seq >= 1", name="seq_positive"),
    Index("ix_session_events_run_id", "run_id"),
)

run_checkpoints = Table(
    "run_checkpoints",
    metadata,
    Column("run_id", UUID(as_uuid=True), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("fencing_token", BigInteger, nullable=False),
    Column("state", JSONB, nullable=False),
    _tz("created_at"),
    PrimaryKeyConstraint("run_id", "seq"),
    ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="CASCADE"),
    CheckConstraint("seq >= 0", name="seq_nonnegative"),
)

# Append-only log of events that exist outside any session (schedule lifecycle).
process_events = Table(
    "process_events",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("event_type", Text, nullable=False),
    Column("actor", Text, nullable=False),
    Column("schedule_id", UUID(as_uuid=True), nullable=True),
    Column("payload", JSONB, nullable=False),
    _tz("occurred_at"),
    PrimaryKeyConstraint("id"),
    Index("ix_process_events_schedule_id_occurred_at", "schedule_id", "occurred_at"),
    Index(
        "ix_process_events_tenant_id_principal_id_occurred_at",
        "tenant_id",
        "principal_id",
        "occurred_at",
    ),
)

SUBSTRATE_TABLES = (
    principals,
    agent_versions,
    agent_active_versions,
    sessions,
    runs,
    session_events,
    run_checkpoints,
    process_events,
)

# --------------------------------------------------------------------------- scheduling

schedules = Table(
    "schedules",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("pause_reason", Text, nullable=True),
    Column("current_revision", Integer, nullable=False),
    _tz("next_fire_at", nullable=True),
    Column("consecutive_failures", Integer, nullable=False, server_default=text("0")),
    _tz("created_at"),
    _tz("updated_at"),
    PrimaryKeyConstraint("id"),
    # The current revision must exist; deferred so schedule and revision 1 insert together.
    ForeignKeyConstraint(
        ["id", "current_revision"],
        ["schedule_revisions.schedule_id", "schedule_revisions.revision"],
        name="fk_schedules_current_revision",
        deferrable=True,
        initially="DEFERRED",
        use_alter=True,
    ),
    CheckConstraint(_in("state", SCHEDULE_STATES), name="state_known"),
    CheckConstraint(
        f"(state = 'PAUSED' AND pause_reason IS NOT NULL AND {_in('pause_reason', PAUSE_REASONS)})"
        " OR (state <> 'PAUSED' AND pause_reason IS NULL)",
        name="pause_reason_matches_state",
    ),
    CheckConstraint("current_revision >= 1", name="current_revision_positive"),
    CheckConstraint("consecutive_failures >= 0", name="consecutive_failures_nonnegative"),
    Index("ix_schedules_state_next_fire_at", "state", "next_fire_at"),
    Index(
        "ix_schedules_tenant_id_principal_id_updated_at_id",
        "tenant_id",
        "principal_id",
        "updated_at",
        "id",
    ),
    Index(
        "ix_schedules_terminal_retention",
        "tenant_id",
        "updated_at",
        "id",
        postgresql_where=text("state IN ('COMPLETED', 'CANCELLED')"),
    ),
)

schedule_revisions = Table(
    "schedule_revisions",
    metadata,
    Column("schedule_id", UUID(as_uuid=True), nullable=False),
    Column("revision", Integer, nullable=False),
    # The canonical JSON definition (scheduling.domain.revision.to_definition()).
    Column("definition", JSONB, nullable=False),
    Column("created_by_principal_id", Text, nullable=False),
    _tz("created_at"),
    PrimaryKeyConstraint("schedule_id", "revision"),
    ForeignKeyConstraint(["schedule_id"], ["schedules.id"]),
    CheckConstraint("revision >= 1", name="revision_positive"),
    CheckConstraint("jsonb_typeof(definition) = 'object'", name="definition_object"),
)

_LIVE_LINK = "session_id IS NOT NULL AND run_id IS NOT NULL AND links_erased_at IS NULL"
_ERASED_LINK = "session_id IS NULL AND run_id IS NULL AND links_erased_at IS NOT NULL"

schedule_occurrences = Table(
    "schedule_occurrences",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("schedule_id", UUID(as_uuid=True), nullable=False),
    Column("schedule_revision", Integer, nullable=False),
    _tz("nominal_fire_at"),
    Column("disposition", Text, nullable=False),
    Column("session_id", UUID(as_uuid=True), nullable=True),
    Column("run_id", UUID(as_uuid=True), nullable=True),
    Column("reason_code", Text, nullable=True),
    Column("authority_version", Text, nullable=True),
    _tz("materialized_at", nullable=True),
    _tz("links_erased_at", nullable=True),
    _tz("created_at"),
    PrimaryKeyConstraint("id"),
    ForeignKeyConstraint(["schedule_id"], ["schedules.id"]),
    # An occurrence references the exact immutable revision it used.
    ForeignKeyConstraint(
        ["schedule_id", "schedule_revision"],
        ["schedule_revisions.schedule_id", "schedule_revisions.revision"],
        name="fk_schedule_occurrences_revision",
    ),
    ForeignKeyConstraint(
        ["session_id"],
        ["sessions.id"],
        ondelete="SET NULL",
        deferrable=True,
        initially="DEFERRED",
    ),
    ForeignKeyConstraint(
        ["run_id"], ["runs.id"], ondelete="SET NULL", deferrable=True, initially="DEFERRED"
    ),
    UniqueConstraint("schedule_id", "nominal_fire_at"),
    CheckConstraint(_in("disposition", DISPOSITIONS), name="disposition_known"),
    # MATERIALIZED: live-linked or explicitly erased, nothing in between.
    CheckConstraint(
        "disposition <> 'MATERIALIZED' OR (materialized_at IS NOT NULL"
        " AND authority_version IS NOT NULL AND reason_code IS NULL"
        f" AND (({_LIVE_LINK}) OR ({_ERASED_LINK})))",
        name="materialized_links",
    ),
    # Every other disposition: no links, no erasure mark, no materialization, a reason code.
    CheckConstraint(
        "disposition = 'MATERIALIZED' OR (session_id IS NULL AND run_id IS NULL"
        " AND links_erased_at IS NULL AND materialized_at IS NULL AND reason_code IS NOT NULL)",
        name="unlinked_dispositions",
    ),
    # An occurrence never materializes before its nominal instant.
    CheckConstraint(
        "materialized_at IS NULL OR materialized_at >= nominal_fire_at", name="not_early"
    ),
    Index("ix_schedule_occurrences_history", "schedule_id", text("nominal_fire_at DESC")),
    Index(
        "uq_schedule_occurrences_run_id",
        "run_id",
        unique=True,
        postgresql_where=text("run_id IS NOT NULL"),
    ),
    Index(
        "uq_schedule_occurrences_session_id",
        "session_id",
        unique=True,
        postgresql_where=text("session_id IS NOT NULL"),
    ),
)

schedule_idempotency_keys = Table(
    "schedule_idempotency_keys",
    metadata,
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("request_hash", Text, nullable=False),
    Column("schedule_id", UUID(as_uuid=True), nullable=False),
    _tz("created_at"),
    PrimaryKeyConstraint("tenant_id", "principal_id", "key"),
    ForeignKeyConstraint(["schedule_id"], ["schedules.id"]),
    Index("ix_schedule_idempotency_keys_schedule_id", "schedule_id"),
)

SCHEDULING_TABLES = (schedules, schedule_revisions, schedule_occurrences, schedule_idempotency_keys)

# --------------------------------------------------------------------------- tool pipeline
# Migration 0003_tool_pipeline: the governed tool pipeline's durable records (hashes,
# states, reason codes, bounded outputs; never the arguments). Principal-scoped.

INVOCATION_STATES = ("AWAITING_APPROVAL", "APPROVED", "DENIED", "SUCCEEDED", "FAILED")

tool_invocations = Table(
    "tool_invocations",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("idempotency_key", Text, nullable=True),
    Column("tool_name", Text, nullable=False),
    Column("tool_version", Text, nullable=False),
    Column("arguments_hash", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("run_id", UUID(as_uuid=True), nullable=True),
    Column("session_id", UUID(as_uuid=True), nullable=True),
    Column("reason_code", Text, nullable=True),
    Column("output", JSONB, nullable=True),
    Column("output_bytes", Integer, nullable=True),
    _tz("created_at"),
    _tz("updated_at"),
    PrimaryKeyConstraint("id"),
    CheckConstraint(_in("state", INVOCATION_STATES), name="state_known"),
    CheckConstraint("output_bytes IS NULL OR output_bytes >= 0", name="output_bytes_non_negative"),
    # A retry after a crash finds its invocation by the caller's key.
    Index(
        "uq_tool_invocations_idempotency_key",
        "tenant_id",
        "principal_id",
        "idempotency_key",
        unique=True,
        postgresql_where=text("idempotency_key IS NOT NULL"),
    ),
)

tool_approval_requests = Table(
    "tool_approval_requests",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("invocation_id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("view_hash", Text, nullable=False),
    _tz("requested_at"),
    PrimaryKeyConstraint("id"),
    ForeignKeyConstraint(["invocation_id"], ["tool_invocations.id"]),
    UniqueConstraint("invocation_id"),
)

tool_approval_decisions = Table(
    "tool_approval_decisions",
    metadata,
    Column("approval_id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("approved", Boolean, nullable=False),
    Column("decided_by", Text, nullable=False),
    _tz("decided_at"),
    PrimaryKeyConstraint("approval_id"),
    ForeignKeyConstraint(["approval_id"], ["tool_approval_requests.id"]),
)


# The outcome outbox (migration 0003_tool_pipeline): written by the scheduler role in
# the accounting or decision transaction; only the pinned title and nominal instant.
schedule_outbox = Table(
    "schedule_outbox",
    metadata,
    Column("id", UUID(as_uuid=True), nullable=False),
    Column("tenant_id", Text, nullable=False),
    Column("principal_id", Text, nullable=False),
    Column("schedule_id", UUID(as_uuid=True), nullable=False),
    Column("occurrence_id", UUID(as_uuid=True), nullable=False),
    Column("kind", Text, nullable=False),
    Column("payload", JSONB, nullable=False),
    _tz("created_at"),
    _tz("delivered_at", nullable=True),
    PrimaryKeyConstraint("id"),
    CheckConstraint("kind IN ('schedule_run_finished')", name="kind_known"),
    CheckConstraint("jsonb_typeof(payload) = 'object'", name="payload_object"),
    Index(
        "ix_schedule_outbox_pending",
        "created_at",
        "id",
        postgresql_where=text("delivered_at IS NULL"),
    ),
)

# Everything migration 0003_tool_pipeline creates.
TOOL_PIPELINE_TABLES = (
    tool_invocations,
    tool_approval_requests,
    tool_approval_decisions,
    schedule_outbox,
)

# Revision 0004_admission_window (ADR 1702): the admission usage read seeks the tenant's
# active runs, its runs finished in the rolling cost windows and those created in the
# last minute, so its cost follows the windows, not the tenant's history.
ADMISSION_WINDOW_INDEXES = (
    Index("ix_runs_tenant_id_status", runs.c.tenant_id, runs.c.status),
    Index("ix_runs_tenant_id_finished_at", runs.c.tenant_id, runs.c.finished_at),
    Index("ix_runs_tenant_id_created_at", runs.c.tenant_id, runs.c.created_at),
)

# Revision 0008_deployment_keys (ADR 2100): one random 32-byte key per purpose, seeded by
# the migration, readable by the API role only (keyed cursors and digests). Not tenant
# data: no row-level security, no policy; no other role holds any privilege on it.
deployment_keys = Table(
    "deployment_keys",
    metadata,
    Column("purpose", Text, nullable=False),
    Column("key", LargeBinary, nullable=False),
    _tz("created_at"),
    PrimaryKeyConstraint("purpose"),
    CheckConstraint("length(key) = 32", name="key_length"),
)
