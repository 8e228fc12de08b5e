"""Gate checks of the migration chain on real PostgreSQL.

gate.schedule.migration_clean: an empty database migrates to head and Alembic's
autogenerate comparison finds no difference from the declared metadata (plus the
catalog checks autogenerate cannot see). gate.schedule.migration_stepwise: from the
predecessor (the substrate revision) upgrade, downgrade and re-upgrade each leave a
valid schema, and substrate rows survive the round trip; the security of the schema
(row-level security flags, every policy with its roles, command and predicates, table
and column grants to the product's roles) after the downgrade equals the
predecessor's, and after the re-upgrade equals the first upgrade's.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from gates.runner.pytest_plugin import GateEvidence
from scheduling.testing import (
    SCHEDULING_TABLES,
    SUBSTRATE_REVISION,
    SUBSTRATE_TABLES,
    TOOL_PIPELINE_TABLES,
    current_revision,
    downgrade_to,
    head_revision,
    metadata,
    role_names,
    schema_diff,
    schema_problems,
    substrate_metadata,
    upgrade_to,
    upgrade_to_head,
)

# Everything after the substrate: the scheduling tables and the tool pipeline's records.
SCHEDULING_NAMES = sorted(t.name for t in (*SCHEDULING_TABLES, *TOOL_PIPELINE_TABLES))
SUBSTRATE_NAMES = sorted(t.name for t in SUBSTRATE_TABLES)
T = datetime(2026, 5, 1, tzinfo=UTC)
AGENT = UUID("3e1c6c1a-2b1e-4a53-9b8e-7d4f9c2a1b00")
SESSION = UUID("3e1c6c1a-2b1e-4a53-9b8e-7d4f9c2a1b01")
# The scheduling revision's trigger function: gone after downgrade, one after upgrade.
_FN = "scheduling_reject_revision_update"


@dataclass(frozen=True)
class State:
    tables: list[str]
    diff: list[str]
    problems: list[str]
    functions: int


async def _state(url: str, target_is_head: bool) -> State:
    """Tables present, autogenerate diff and catalog problems of the database at ``url``."""
    async with admin_connection(url) as conn:
        tables = sorted(
            r[0]
            for r in await conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
            )
        )
        target = metadata if target_is_head else substrate_metadata()
        diff = await conn.run_sync(schema_diff, target)
        problems = await conn.run_sync(schema_problems, role_names().api) if target_is_head else []
        functions = (
            await conn.execute(text("SELECT count(*) FROM pg_proc WHERE proname = :f"), {"f": _FN})
        ).scalar_one()
        await conn.rollback()
    return State(tables, diff, problems, int(functions))


@pytest.mark.gate("gate.schedule.migration_clean")
async def test_empty_database_migrates_to_head_equal_to_metadata(
    pg_empty_url: str, gate_evidence: GateEvidence
) -> None:
    assert await current_revision(pg_empty_url) is None
    started = time.perf_counter()
    await upgrade_to_head(pg_empty_url)
    gate_evidence.record("upgrade_seconds", round(time.perf_counter() - started, 3))
    assert await current_revision(pg_empty_url) == head_revision()
    state = await _state(pg_empty_url, target_is_head=True)
    assert state.diff == [], state.diff
    assert state.problems == [], state.problems
    assert state.tables == sorted([t.name for t in metadata.sorted_tables] + ["alembic_version"])
    gate_evidence.record("head", head_revision())
    gate_evidence.record("tables", state.tables)
    gate_evidence.record("autogenerate_differences", 0)
    gate_evidence.record("catalog_problems", 0)


async def _seed_substrate(url: str) -> None:
    async with admin_connection(url) as conn:
        await conn.execute(
            text(
                "INSERT INTO principals VALUES ('t', 'p', true, ARRAY['schedule.read'],"
                " '{}'::jsonb, :t, :t)"
            ),
            {"t": T},
        )
        await conn.execute(
            text(
                "INSERT INTO agent_versions VALUES (:a, '1', 'default', '{}'::jsonb,"
                " '{}'::jsonb, 'h', :t)"
            ),
            {"a": AGENT, "t": T},
        )
        await conn.execute(
            text("INSERT INTO sessions VALUES (:s, 't', 'p', :a, '1', '{}'::jsonb, NULL, :t, :t)"),
            {"s": SESSION, "a": AGENT, "t": T},
        )
        await conn.commit()


async def _substrate_rows(url: str) -> list[int]:
    async with admin_connection(url) as conn:
        return [
            int((await conn.execute(text(f"SELECT count(*) FROM {name}"))).scalar_one())
            for name in ("principals", "agent_versions", "sessions")
        ]


_SECURITY_QUERIES = {
    "rls": "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class"
    " WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace",
    "policies": "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check"
    " FROM pg_policies WHERE schemaname = current_schema()",
    "table_grants": "SELECT grantee, table_name, privilege_type"
    " FROM information_schema.role_table_grants"
    " WHERE table_schema = current_schema() AND grantee = ANY(:roles)",
    "column_grants": "SELECT grantee, table_name, column_name, privilege_type"
    " FROM information_schema.column_privileges"
    " WHERE table_schema = current_schema() AND grantee = ANY(:roles)",
}


async def security(url: str) -> dict[str, list[str]]:
    """The schema's security, as comparable sorted text rows."""
    roles = list(role_names().all())
    out: dict[str, list[str]] = {}
    async with admin_connection(url) as conn:
        for name, sql in _SECURITY_QUERIES.items():
            params = {"roles": roles} if ":roles" in sql else {}
            rows = await conn.execute(text(sql), params)
            out[name] = sorted(repr(tuple(r)) for r in rows)
        await conn.rollback()
    return out


Downgrade = Callable[[str], Awaitable[None]]


async def downgrade_to_predecessor(url: str) -> None:
    """From head to the scheduling revision's predecessor (every later revision's
    downgrade runs on the way)."""
    await downgrade_to(url, SUBSTRATE_REVISION)


@pytest.mark.gate("gate.schedule.migration_stepwise")
async def test_scheduling_revision_is_reversible_at_its_boundary(
    pg_empty_url: str, gate_evidence: GateEvidence
) -> None:
    await check_stepwise(pg_empty_url, gate_evidence)


async def check_stepwise(
    url: str, gate_evidence: GateEvidence, downgrade: Downgrade = downgrade_to_predecessor
) -> None:
    """The stepwise check; ``downgrade`` is the step under test (tests of the test pass
    a wrong one)."""
    await upgrade_to(url, SUBSTRATE_REVISION)
    assert await current_revision(url) == SUBSTRATE_REVISION
    predecessor = await _state(url, target_is_head=False)
    assert predecessor.diff == [], predecessor.diff
    assert not set(SCHEDULING_NAMES) & set(predecessor.tables)
    await _seed_substrate(url)
    predecessor_security = await security(url)
    assert predecessor_security["policies"], "the substrate has row-level security policies"
    head_security: dict[str, list[str]] | None = None
    steps = []
    for step in ("upgrade", "downgrade", "re-upgrade"):
        if step == "downgrade":
            await downgrade(url)
            expected, at_head = SUBSTRATE_REVISION, False
        else:
            await upgrade_to_head(url)
            expected, at_head = head_revision(), True
        assert await current_revision(url) == expected
        state = await _state(url, target_is_head=at_head)
        assert state.diff == [], (step, state.diff)
        assert state.problems == [], (step, state.problems)
        if at_head:
            assert set(SCHEDULING_NAMES) <= set(state.tables), (step, state.tables)
        else:
            assert not set(SCHEDULING_NAMES) & set(state.tables), (step, state.tables)
        assert state.functions == (1 if at_head else 0), (step, state.functions)
        assert set(SUBSTRATE_NAMES) <= set(state.tables)
        assert await _substrate_rows(url) == [1, 1, 1], step
        now = await security(url)
        if not at_head:
            assert now == predecessor_security, (step, _security_diff(predecessor_security, now))
        elif head_security is None:
            head_security = now
        else:
            assert now == head_security, (step, _security_diff(head_security, now))
        steps.append({"step": step, "revision": expected, "tables": len(state.tables)})
    gate_evidence.record("predecessor", SUBSTRATE_REVISION)
    gate_evidence.record("steps", steps)
    gate_evidence.record("substrate_rows_preserved", ["principals", "agent_versions", "sessions"])
    assert head_security is not None
    gate_evidence.record("security_compared", {k: len(v) for k, v in head_security.items()})


def _security_diff(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, Any]:
    return {
        k: {
            "lost": sorted(set(before[k]) - set(after[k])),
            "gained": sorted(set(after[k]) - set(before[k])),
        }
        for k in before
        if before[k] != after[k]
    }
