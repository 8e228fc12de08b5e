"""gate.schedule.persistence_schema: the metadata inspection is shown able to fail on
every tenant table, not only the few ``test_persistence`` breaks, and on a primary key
that still exists but keys the wrong columns.

* Row-level security: every table the migrations put under row-level security (read
  from the live catalog, not from the inspection's own list) is, in one rolled-back
  transaction, stripped of it - RLS disabled and not forced, its API policies dropped
  - and the inspection must name each table for each of the three.
* Keys: the request-idempotency key re-keyed on (tenant_id, key) - one principal's key
  would then collide with, or replay, another's of the same tenant - and the principal
  row re-keyed on principal_id alone (a principal id shared by two tenants), each
  under its original constraint name, must be reported as a primary key whose columns
  differ.

Tests of the test: ``scheduling-gates mutate`` (``plumbing.inspection_pk_columns_unchecked``,
``plumbing.inspection_outbox_unlisted``, ``plumbing.inspection_checkpoints_unlisted``).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from gates.runner.pytest_plugin import GateEvidence
from scheduling.testing import role_names, schema_problems

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.persistence_schema")]

ROLES = role_names()


async def _problems(conn: Any) -> list[str]:
    result: list[str] = await conn.run_sync(schema_problems, ROLES.api)
    return result


async def test_every_rls_table_is_inspected(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with admin_connection(pg_url) as conn:
        assert await _problems(conn) == []
        await conn.rollback()
        secured = [
            str(r[0])
            for r in await conn.execute(
                text(
                    "SELECT relname FROM pg_class WHERE relrowsecurity"
                    " AND relnamespace = current_schema()::regnamespace ORDER BY 1"
                )
            )
        ]
        policies = [
            (str(r[0]), str(r[1]))
            for r in await conn.execute(
                text(
                    "SELECT tablename, policyname FROM pg_policies"
                    " WHERE schemaname = current_schema() AND :api = ANY(roles)"
                ),
                {"api": ROLES.api},
            )
        ]
        await conn.rollback()
        assert len(secured) >= 14, secured
        async with conn.begin():
            for table in secured:
                await conn.execute(text(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY"))
                await conn.execute(text(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY"))
            for table, policy in policies:
                await conn.execute(text(f"DROP POLICY {policy} ON {table}"))
            broken = await _problems(conn)
            await conn.rollback()
        missed = {
            table: [
                what
                for what in (
                    "row-level security not enabled",
                    "row-level security not forced",
                    "no row-level policy",
                )
                if f"{table}: {what}" not in " | ".join(broken)
            ]
            for table in secured
        }
        missed = {t: m for t, m in missed.items() if m}
        assert missed == {}, missed
        assert await _problems(conn) == []
    gate_evidence.record("rls_tables_broken_and_reported", secured)


REKEYED = {
    "schedule_idempotency_keys": ("pk_schedule_idempotency_keys", "tenant_id, key"),
    "principals": ("pk_principals", "principal_id"),
}


async def test_a_primary_key_on_the_wrong_columns_is_reported(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with admin_connection(pg_url) as conn:
        async with conn.begin():
            for table, (name, columns) in REKEYED.items():
                await conn.execute(text(f"ALTER TABLE {table} DROP CONSTRAINT {name} CASCADE"))
                await conn.execute(
                    text(f"ALTER TABLE {table} ADD CONSTRAINT {name} PRIMARY KEY ({columns})")
                )
            broken = await _problems(conn)
            await conn.rollback()
        for table in REKEYED:
            assert f"{table}: primary key columns differ" in broken, (table, broken)
        assert await _problems(conn) == []
    gate_evidence.record("rekeyed_reported", sorted(REKEYED))
