"""Test of the test: the EXPLAIN-by-behaviour index check of persistence_schema
(``gates.checks.test_persistence_indexes``) turns red when the retention index is
narrowed to one state (its name and columns unchanged: only the predicate differs, so
a comparison by name or column list passes it) and when the occurrence history index
is dropped (the natural-key index still finds the rows; the gate wants the named one)."""

from __future__ import annotations

import pytest

from gates.checks.persistence_support import admin_connection
from gates.checks.test_persistence_indexes import index_problems

pytestmark = pytest.mark.postgres

NARROWED = (
    "DROP INDEX ix_schedules_terminal_retention",
    "CREATE INDEX ix_schedules_terminal_retention ON schedules (tenant_id, updated_at, id)"
    " WHERE state = 'COMPLETED'",
)


async def _apply(url: str, statements: tuple[str, ...]) -> None:
    async with admin_connection(url) as conn:
        for statement in statements:
            await conn.exec_driver_sql(statement)
        await conn.commit()


async def test_the_shipped_schema_passes(pg_url: str) -> None:
    problems, evidence = await index_problems(pg_url)
    assert problems == []
    assert evidence["retention_purge"]["index_access"] == [
        ["Index Scan ix_schedules_terminal_retention"]
    ]


async def test_a_retention_index_narrowed_to_one_state_is_caught(pg_url: str) -> None:
    await _apply(pg_url, NARROWED)
    problems, _ = await index_problems(pg_url)
    assert any(p.startswith("retention_purge: schedules read through") for p in problems), problems
    assert all(p.startswith("retention_purge") for p in problems), problems


async def test_a_dropped_history_index_is_caught(pg_url: str) -> None:
    await _apply(pg_url, ("DROP INDEX ix_schedule_occurrences_history",))
    problems, _ = await index_problems(pg_url)
    assert any(p.startswith("occurrence_inbox_page") for p in problems), problems
