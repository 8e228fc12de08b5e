"""gate.schedule.migration_stepwise: the run worker's grants round-trip too.

``test_migrations`` compares the schema's security (row-level security, policies, and
the table and column grants of the owner, API, scheduler and maintenance roles) after
a downgrade to the predecessor with the predecessor's, and after the re-upgrade with the
first upgrade's. The run-worker group role (revision 0005, claim facts 0006) is a
product role too: a downgrade that dropped its policies but left its grants behind
would leave the predecessor schema with SELECT on every session, run and checkpoint
and UPDATE on the run's lease columns granted to a role the predecessor never had.
Here the table and column grants of every group role, the run worker's included, are
compared the same way.

Test of the test: ``scheduling-gates mutate`` (mutant
``queue.run_worker_downgrade_keeps_grants``).
"""

from __future__ import annotations

import pytest
from sqlalchemy import text

from gates.checks.persistence_support import admin_connection
from gates.runner.pytest_plugin import GateEvidence
from scheduling.testing import (
    SUBSTRATE_REVISION,
    current_revision,
    downgrade_to,
    head_revision,
    role_names,
    upgrade_to,
    upgrade_to_head,
)

pytestmark = pytest.mark.postgres

_GRANTS = {
    "table_grants": "SELECT grantee, table_name, privilege_type"
    " FROM information_schema.role_table_grants"
    " WHERE table_schema = current_schema() AND grantee = ANY(:roles)",
    "column_grants": "SELECT grantee, table_name, column_name, privilege_type"
    " FROM information_schema.column_privileges"
    " WHERE table_schema = current_schema() AND grantee = ANY(:roles)",
}


async def grants(url: str) -> dict[str, list[str]]:
    """Every group role's table and column grants, as comparable sorted text rows."""
    roles = list(role_names().every())
    out: dict[str, list[str]] = {}
    async with admin_connection(url) as conn:
        for name, sql in _GRANTS.items():
            rows = await conn.execute(text(sql), {"roles": roles})
            out[name] = sorted(repr(tuple(r)) for r in rows)
        await conn.rollback()
    return out


def _diff(before: dict[str, list[str]], after: dict[str, list[str]]) -> dict[str, object]:
    return {
        k: {
            "lost": sorted(set(before[k]) - set(after[k])),
            "gained": sorted(set(after[k]) - set(before[k])),
        }
        for k in before
        if before[k] != after[k]
    }


@pytest.mark.gate("gate.schedule.migration_stepwise")
async def test_every_roles_grants_round_trip(
    pg_empty_url: str, gate_evidence: GateEvidence
) -> None:
    url = pg_empty_url
    await upgrade_to(url, SUBSTRATE_REVISION)
    predecessor = await grants(url)
    await upgrade_to_head(url)
    head = await grants(url)
    worker = role_names().run_worker
    assert any(worker in row for row in head["table_grants"]), "the run worker has no grant"
    await downgrade_to(url, SUBSTRATE_REVISION)
    assert await current_revision(url) == SUBSTRATE_REVISION
    downgraded = await grants(url)
    assert downgraded == predecessor, ("downgrade", _diff(predecessor, downgraded))
    await upgrade_to_head(url)
    assert await current_revision(url) == head_revision()
    again = await grants(url)
    assert again == head, ("re-upgrade", _diff(head, again))
    gate_evidence.record("grants_compared", {k: len(v) for k, v in head.items()})
