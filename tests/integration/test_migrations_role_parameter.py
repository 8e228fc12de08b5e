"""The role prefix is a migration parameter, not an environment read inside a revision
(ADR 2161): the chain migrated with ``role_prefix=`` names that deployment's roles
whatever ``AGENT_SCHEDULE_ROLE_PREFIX`` says, and downgrades with it back to base."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from scheduling.adapters.postgres.inspection import schema_diff
from scheduling.adapters.postgres.migrations import (
    current_revision,
    downgrade_to,
    head_revision,
    upgrade_to_head,
)

pytestmark = pytest.mark.postgres

PREFIX = "frozen_param"

OWNERS = text(
    "SELECT DISTINCT tableowner FROM pg_tables"
    " WHERE schemaname = current_schema() AND tablename <> 'alembic_version'"
)
GRANTEES = text(
    "SELECT DISTINCT grantee FROM information_schema.role_table_grants"
    " WHERE table_schema = current_schema() AND grantee LIKE :like"
)


async def test_the_role_prefix_parameter_names_the_roles(
    pg_empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_SCHEDULE_ROLE_PREFIX", "not_this_one")
    await upgrade_to_head(pg_empty_url, role_prefix=PREFIX)
    assert await current_revision(pg_empty_url) == head_revision()
    async with admin_connection(pg_empty_url) as conn:
        owners = {r[0] for r in await conn.execute(OWNERS)}
        grantees = {r[0] for r in await conn.execute(GRANTEES, {"like": f"{PREFIX}_%"})}
        others = {r[0] for r in await conn.execute(GRANTEES, {"like": "not_this_one%"})}
        diff = await conn.run_sync(schema_diff)
        await conn.rollback()
    assert owners == {f"{PREFIX}_owner"}
    assert grantees == {
        f"{PREFIX}_{kind}" for kind in ("api", "scheduler", "maintenance", "run_worker")
    } | {f"{PREFIX}_owner"}
    assert others == set()
    assert diff == []
    await downgrade_to(pg_empty_url, "base", role_prefix=PREFIX)
    assert await current_revision(pg_empty_url) is None
