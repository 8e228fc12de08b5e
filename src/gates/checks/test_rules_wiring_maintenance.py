"""``rule.purge.terminal`` with the maintenance role production builds from ``Settings``
(``bootstrap.build_maintenance``: only the storage is the world's), and its sweep as the
role runs it (``purge_once``: one batch for every configured tenant).

The other purge checks read the retention back from the service they purge with; this
one configures it: with ``AGENT_SCHEDULE_TERMINAL_RETENTION_DAYS=3`` and
``AGENT_SCHEDULE_TENANTS`` naming two tenants, two cancelled schedules of each tenant
are kept by a sweep a microsecond before three days after the cancel, and every one is
purged by the sweep at exactly three days (far inside the 30 days shipped), each
tenant's in its own batch.

Tests of the test: ``scheduling-gates mutate`` (``wiring.retention_days_default``,
``wiring.maintenance_tenants_dropped``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.bootstrap import build_maintenance
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import TENANT_B, principal, seed_durable, world_settings

pytestmark = pytest.mark.postgres

THEIRS = principal("wired-purge-neighbour", TENANT_B)
RETENTION_DAYS = 3


@pytest.mark.rule("rule.purge.terminal")
async def test_the_configured_retention_and_tenants_are_swept(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        await seed_durable(h.admin, [THEIRS])
        made = {
            who.tenant_id: [
                await h.create(who, title=f"terminal {n}", key=f"{who.tenant_id}-{n}")
                for n in range(2)
            ]
            for who in (WHO, THEIRS)
        }
        for who in (WHO, THEIRS):
            for sid in made[who.tenant_id]:
                await h.world.service.cancel(who, sid, 1)
        cancelled_at = max(
            [(await h.schedule(sid))["updated_at"] for ids in made.values() for sid in ids]
        )
        role = build_maintenance(
            world_settings(
                AGENT_SCHEDULE_TERMINAL_RETENTION_DAYS=str(RETENTION_DAYS),
                AGENT_SCHEDULE_TENANTS=f"{WHO.tenant_id},{THEIRS.tenant_id}",
            ),
            clock=h.clock,
            ids=h.world.ids.fork("wired-maintenance"),
            storage=h.storage,
        )
        retention = timedelta(days=RETENTION_DAYS)
        h.clock.advance_to(cancelled_at + retention - timedelta(microseconds=1))
        inside = await role.purge_once()
        h.clock.advance_to(cancelled_at + retention)
        at_age = await role.purge_once()
        left = await h.sql("SELECT count(*) AS n FROM schedules")
    finally:
        await h.close()
    tenants = {WHO.tenant_id: 0, THEIRS.tenant_id: 0}
    assert inside == tenants, f"purged inside the configured retention: {inside}"
    assert at_age == dict.fromkeys(tenants, 2), f"not purged at the configured age: {at_age}"
    assert left[0]["n"] == 0, left
    gate_evidence.record("sweeps", {"inside": inside, "at_age": at_age})
