"""Tests of the persistence gate checks: each fails against a broken database or adapter.

The gate checks themselves live in ``src/gates/checks/test_persistence.py``; here the
same check functions run against a database with one policy or constraint removed
(committed, in the test's own clone) or through a unit of work that autocommits,
and must raise ``AssertionError``.
"""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from gates.checks.persistence_support import admin_connection
from gates.checks.test_persistence import check_erasure_audited, check_isolation, check_uow_atomic
from gates.runner.pytest_plugin import GateEvidence
from scheduling.adapters.postgres.roles import PRINCIPAL_MATCH, TENANT_MATCH, role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.domain.identity import Principal

API = role_names().api
# A check that finds a broken guarantee fails with an assertion or pytest.fail.
CHECK_FAILED = (AssertionError, pytest.fail.Exception)


async def _break(url: str, *statements: str) -> None:
    async with admin_connection(url) as conn:
        for statement in statements:
            await conn.execute(text(statement))
        await conn.commit()


@pytest.mark.parametrize(
    "statements",
    [
        pytest.param(
            [
                "DROP POLICY schedules_api ON schedules",
                f"CREATE POLICY schedules_api ON schedules TO {API} USING ({TENANT_MATCH})",
            ],
            id="schedules-policy-forgets-principal",
        ),
        pytest.param(["ALTER TABLE runs DISABLE ROW LEVEL SECURITY"], id="runs-rls-disabled"),
        pytest.param(
            [
                "DROP POLICY process_events_api ON process_events",
                f"CREATE POLICY process_events_api ON process_events TO {API}"
                f" USING ({PRINCIPAL_MATCH}) WITH CHECK (true)",
            ],
            id="events-policy-checks-nothing-on-write",
        ),
        pytest.param(
            [
                "DROP POLICY schedule_occurrences_api ON schedule_occurrences",
                "CREATE POLICY schedule_occurrences_api ON schedule_occurrences"
                f" TO {API} USING (schedule_id IS NOT NULL)",
            ],
            id="occurrence-policy-weakened-to-schedule-id-not-null",
        ),
        pytest.param(
            [f"GRANT UPDATE, DELETE ON process_events TO {API}"],
            id="api-may-rewrite-process-events",
        ),
        pytest.param(
            [f"GRANT UPDATE, DELETE ON schedule_idempotency_keys TO {API}"],
            id="api-may-rewrite-idempotency-keys",
        ),
        pytest.param(
            [f"GRANT DELETE ON schedule_occurrences TO {API}"],
            id="api-may-delete-occurrences",
        ),
    ],
)
async def test_isolation_check_fails_when_a_policy_is_weakened(
    pg_url: str, statements: list[str]
) -> None:
    await _break(pg_url, *statements)
    with pytest.raises(CHECK_FAILED):
        await check_isolation(pg_url, GateEvidence())


async def test_erasure_check_fails_without_the_link_rule(pg_url: str) -> None:
    await _break(
        pg_url,
        "ALTER TABLE schedule_occurrences"
        " DROP CONSTRAINT ck_schedule_occurrences_materialized_links",
    )
    with pytest.raises(CHECK_FAILED):
        await check_erasure_audited(pg_url, GateEvidence())


class _LeakyUnitOfWork(PostgresUnitOfWork):
    """A broken unit of work that commits where it should roll back."""

    async def rollback(self) -> None:
        await self.commit()


class _LeakyFactory(PostgresUnitOfWorkFactory):
    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        return _LeakyUnitOfWork(
            self.engine,
            tenant_id=principal.tenant_id if principal else tenant_id,
            principal_id=principal.principal_id if principal else None,
            assume_role=self.assume_role,
        )


async def test_atomicity_check_fails_for_a_unit_of_work_that_leaks_writes(pg_url: str) -> None:
    factory = _LeakyFactory(create_async_engine(to_asyncpg_url(pg_url)))
    with pytest.raises(CHECK_FAILED):
        await check_uow_atomic(pg_url, factory, GateEvidence())
