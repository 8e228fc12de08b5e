"""The deployment key ring: one random 32-byte key per purpose (ADR 2100).

Revision ID: 0008_deployment_keys
Revises: 0007_run_queued_notify
Create Date: 2026-12-01

Keyed digests and sealed tokens (list cursors, idempotency-key digests) need a key
every instance of one deployment shares, without a configured secret per edge. This
revision creates ``deployment_keys`` and seeds one key per purpose this revision knows
(frozen here as it seeded them); the key is drawn by the server from
``gen_random_uuid()`` (``pg_strong_random``) and hashed to 32 bytes, so no key ever
passes through a migration script or its offline SQL. The table is not tenant data:
it is owned by the owner role, PUBLIC loses every privilege, and only the API role
may SELECT it (it cannot add, change or remove a key). A later purpose needs a later
revision that seeds it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_deployment_keys"
down_revision: str | None = "0007_run_queued_notify"
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
    op.create_table(
        "deployment_keys",
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("length(key) = 32", name="ck_deployment_keys_key_length"),
        sa.PrimaryKeyConstraint("purpose", name="pk_deployment_keys"),
    )
    roles = _roles()
    op.execute("ALTER TABLE deployment_keys OWNER TO {owner}".format(**roles))
    op.execute("REVOKE ALL ON deployment_keys FROM PUBLIC")
    op.execute("GRANT SELECT ON deployment_keys TO {api}".format(**roles))
    op.execute(
        """
        INSERT INTO deployment_keys (purpose, key, created_at)
        SELECT purpose, sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text
                                          || gen_random_uuid()::text, 'UTF8')),
               transaction_timestamp()
        FROM unnest(ARRAY['tool.cursor', 'http.cursor', 'idempotency.key']) AS purpose
        """
    )


def downgrade() -> None:
    op.drop_table("deployment_keys")
