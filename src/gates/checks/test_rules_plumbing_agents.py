"""gate.schedule.model_create_happy_path "pins the active agent": the durable agent
registry the API role's tools and service pin from (``storage.directories("api",
durable=True)``) follows the floating active pointer through every rotation.

Three versions of one agent are written and activated in turn - 1, 2, 3, then back
to 1 - through the ordinary agent repository (the rotation a deploy does, a pointer
that already exists being moved); after each, ``active`` is exactly the version just
activated, with that version's policy profile, while ``get`` of each pinned version
still resolves that version. A pointer that kept its first version, or a read that
joined any version of the agent, would pin a stale agent into every later create.

Tests of the test: ``scheduling-gates mutate`` (``plumbing.agent_set_active_keeps_version``,
``plumbing.agent_active_any_version``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.ports.records import AgentVersionRecord
from scheduling.testing import PostgresUnitOfWorkFactory, open_storage

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.model_create_happy_path")]

AGENT = UUID("6f1d2c3b-4a59-4e8d-9c7b-1a2b3c4d5e6f")
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
LIMITS = {"max_steps": 8, "max_model_calls": 4, "max_tool_calls": 4, "max_cost": "0.75"}
VERSIONS = ("1.0.0", "2.0.0", "3.0.0")


def _version(version: str) -> AgentVersionRecord:
    return AgentVersionRecord(
        agent_id=AGENT,
        version=version,
        policy_profile=f"profile-{version}",
        spec={"model": "scripted", "tools": [], "version": version},
        limits=dict(LIMITS),
        content_hash=f"sha256:{version}",
        created_at=T0,
    )


async def test_the_registry_follows_every_rotation_of_the_active_version(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    storage = open_storage(pg_url, pool_size=2)
    try:
        async with admin.begin() as uow:
            for version in VERSIONS:
                await uow.agents.put_version(_version(version))
            await uow.commit()
        _, agents = storage.directories("api", durable=True)
        seen: list[str] = []
        for step, version in enumerate((*VERSIONS, VERSIONS[0]), start=1):
            async with admin.begin() as uow:
                await uow.agents.set_active(AGENT, version, T0 + timedelta(minutes=step))
                await uow.commit()
            active = await agents.active(AGENT)
            assert active is not None, (step, version)
            assert (active.version, active.policy_profile) == (version, f"profile-{version}"), (
                step,
                version,
                active,
            )
            seen.append(active.version)
            for pinned in VERSIONS:
                spec = await agents.get(AGENT, pinned)
                assert spec is not None, pinned
                assert spec.version == pinned, (pinned, spec)
        gate_evidence.record("active_after_each_rotation", seen)
    finally:
        await storage.close()
        await admin.dispose()
