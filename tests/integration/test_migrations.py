"""The migration chain end to end: head and back to base, the command line, and a
proof that the autogenerate comparison used by migration_clean detects drift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from scheduling.adapters.postgres.inspection import schema_diff
from scheduling.adapters.postgres.migrations import (
    SUBSTRATE_REVISION,
    current_revision,
    downgrade_to_base,
    head_revision,
    upgrade_to_head,
)
from scheduling.adapters.postgres.roles import role_names

CHECKOUT = Path(__file__).resolve().parents[2]  # holds the developers' alembic.ini


async def _objects(url: str) -> dict[str, list[str]]:
    async with admin_connection(url) as conn:
        tables = [
            r[0]
            for r in await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            )
        ]
        functions = [
            r[0]
            for r in await conn.execute(
                text(
                    "SELECT proname FROM pg_proc"
                    " WHERE pronamespace = current_schema()::regnamespace"
                )
            )
        ]
        roles = [
            r[0]
            for r in await conn.execute(
                text("SELECT rolname FROM pg_roles WHERE rolname = ANY(:r)"),
                {"r": list(role_names().all())},
            )
        ]
    return {"tables": sorted(tables), "functions": sorted(functions), "roles": sorted(roles)}


async def test_empty_database_to_head_and_back_to_base(pg_empty_url: str) -> None:
    await upgrade_to_head(pg_empty_url)
    assert await current_revision(pg_empty_url) == head_revision()
    at_head = await _objects(pg_empty_url)
    assert "schedule_occurrences" in at_head["tables"]
    assert at_head["functions"] == [
        "scheduling_reject_event_update",
        "scheduling_reject_revision_update",
        "scheduling_run_queued_notify",
    ]
    await downgrade_to_base(pg_empty_url)
    assert await current_revision(pg_empty_url) is None
    at_base = await _objects(pg_empty_url)
    # Only Alembic's own table remains; cluster-global roles are deliberately kept.
    assert at_base["tables"] == ["alembic_version"]
    assert at_base["functions"] == []
    assert at_base["roles"] == sorted(role_names().all())


def _alembic(url: str, *args: str) -> str:
    env = {**os.environ, "AGENT_SCHEDULE_DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=CHECKOUT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


async def test_command_line_upgrade_downgrade_upgrade(pg_empty_url: str, tmp_path: Path) -> None:
    _alembic(pg_empty_url, "upgrade", "head")
    assert await current_revision(pg_empty_url) == head_revision()
    _alembic(pg_empty_url, "downgrade", SUBSTRATE_REVISION)
    assert await current_revision(pg_empty_url) == SUBSTRATE_REVISION
    _alembic(pg_empty_url, "upgrade", "head")
    assert head_revision() in _alembic(pg_empty_url, "current")
    assert "No new upgrade operations detected" in _alembic(pg_empty_url, "check")


@pytest.mark.parametrize(
    ("statement", "phrase"),
    [
        ("DROP INDEX ix_schedules_state_next_fire_at", "ix_schedules_state_next_fire_at"),
        ("ALTER TABLE runs ALTER COLUMN priority TYPE bigint", "priority"),
        ("ALTER TABLE sessions ALTER COLUMN title SET NOT NULL", "title"),
        ("ALTER TABLE schedules ADD COLUMN stray text", "stray"),
        ("CREATE TABLE stray_table (id int)", "stray_table"),
        (
            "ALTER TABLE schedule_occurrences DROP CONSTRAINT"
            " uq_schedule_occurrences_schedule_id_nominal_fire_at",
            "('add_constraint', UniqueConstraint(Column('schedule_id'",
        ),
        ("ALTER TABLE schedules ALTER COLUMN consecutive_failures DROP DEFAULT", "consecutive"),
    ],
)
async def test_autogenerate_comparison_detects_drift(
    pg_url: str, statement: str, phrase: str
) -> None:

    async with admin_connection(pg_url) as conn:
        assert await conn.run_sync(schema_diff) == []
        await conn.execute(text(statement))
        diff = await conn.run_sync(schema_diff)
        await conn.rollback()
    assert any(phrase in d for d in diff), diff
