"""Tests of the test for gate.schedule.migration_stepwise: a downgrade that leaves the
substrate's row-level security, a policy or a grant changed passes every table and
diff comparison, and must now fail on the security comparison."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from gates.checks.test_migrations import Downgrade, check_stepwise, downgrade_to_predecessor
from gates.runner.pytest_plugin import GateEvidence
from scheduling.adapters.postgres.roles import role_names

pytestmark = pytest.mark.postgres

API = role_names().api


def damaging(*statements: str) -> Downgrade:
    async def downgrade(url: str) -> None:
        await downgrade_to_predecessor(url)
        async with admin_connection(url) as conn:
            for statement in statements:
                await conn.execute(text(statement))
            await conn.commit()

    return downgrade


@pytest.mark.parametrize(
    "statements",
    [
        pytest.param(["ALTER TABLE sessions DISABLE ROW LEVEL SECURITY"], id="rls-left-off"),
        pytest.param([f"REVOKE DELETE ON runs FROM {API}"], id="grant-lost"),
        pytest.param([f"GRANT UPDATE ON process_events TO {API}"], id="grant-widened"),
        pytest.param(
            [
                "DROP POLICY runs_api ON runs",
                f"CREATE POLICY runs_api ON runs TO {API} USING (true)",
            ],
            id="policy-weakened",
        ),
    ],
)
async def test_a_downgrade_that_changes_security_fails(
    pg_empty_url: str, statements: list[str]
) -> None:
    with pytest.raises(AssertionError) as failure:
        await check_stepwise(pg_empty_url, GateEvidence(), damaging(*statements))
    # It fails on the security comparison of the downgraded schema, nothing earlier.
    assert "'downgrade'" in str(failure.value)
    assert "lost" in str(failure.value) or "gained" in str(failure.value)


async def test_the_real_downgrade_passes(pg_empty_url: str) -> None:
    await check_stepwise(pg_empty_url, GateEvidence())
