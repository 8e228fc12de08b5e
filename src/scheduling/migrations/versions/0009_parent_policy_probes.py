"""Child-table policies probe their parent row; they never hash the principal's rows.

Revision ID: 0009_parent_policy_probes
Revises: 0008_deployment_keys
Create Date: 2026-12-05

A child table's row-level policy (a revision, an occurrence, a session event, a run
checkpoint) admits a row when its parent is visible: ``EXISTS (SELECT 1 FROM parent p
WHERE p.id = child.parent_id)``, the parent's own policy scoping that read to the
caller. PostgreSQL may plan such a correlated ``EXISTS`` two ways and picks one by
estimated cost: a probe of the parent's primary key per child row, or a *hashed*
subplan that first reads every parent row the caller can see. Under a generic plan (a
prepared statement after its fifth run) with statistics taken while the table was
small, the estimate of "the caller's rows" is one, the hash looks free, and every
point read and list page then reads all of the principal's schedules: measured at
3,000 schedules, 1.9 ms and ~3,000 buffers per request instead of 0.15 ms and 9
(ADR 2710). ``OFFSET 0`` in the subquery keeps its meaning (an ``EXISTS`` ignores
row counts) and is PostgreSQL's traditional optimization fence: its planner leaves an
``EXISTS`` with an offset unsimplified (``simplify_EXISTS_query``), so it is never
turned into the hashable ``IN`` form, and each child row costs one primary-key probe
whatever the statistics say.

Policies are altered in place (``ALTER POLICY`` keeps their names, roles and
commands); no grant changes. The downgrade restores the previous predicates.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_parent_policy_probes"
down_revision: str | None = "0008_deployment_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (policy, child table, parent table, the child's column naming its parent)
_PARENT_POLICIES = (
    ("session_events_api", "session_events", "sessions", "session_id"),
    ("run_checkpoints_api", "run_checkpoints", "runs", "run_id"),
    ("schedule_revisions_api", "schedule_revisions", "schedules", "schedule_id"),
    ("schedule_occurrences_api", "schedule_occurrences", "schedules", "schedule_id"),
    ("schedule_revisions_maintenance", "schedule_revisions", "schedules", "schedule_id"),
    ("schedule_occurrences_maintenance", "schedule_occurrences", "schedules", "schedule_id"),
)


def _alter(policy: str, child: str, parent: str, column: str, fence: str) -> str:
    # Identifiers from _PARENT_POLICIES only.
    visible = f"EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {child}.{column}{fence})"  # noqa: S608
    return f"ALTER POLICY {policy} ON {child} USING ({visible}) WITH CHECK ({visible})"


def upgrade() -> None:
    for policy in _PARENT_POLICIES:
        op.execute(_alter(*policy, fence=" OFFSET 0"))


def downgrade() -> None:
    for policy in _PARENT_POLICIES:
        op.execute(_alter(*policy, fence=""))
