"""gate.schedule.scope_isolated, facet read_isolation: cross-tenant or cross-principal
schedule reads return the same not-found as a missing schedule.

Real PostgreSQL through the API role (forced row-level security on, repository
predicates on). Alice in tenant A owns schedules; Bob (same tenant) and "alice" of
tenant B (same principal id, other tenant) read them by id through every read of the
service (point read, occurrence list) and list their own schedules. Every foreign read
must raise exactly the error a never-existing id raises (class, code, message,
details), and no foreign row may appear in a list. The facet "run_snapshot" (the run
snapshots only the requested scopes) belongs to the materializer and is not bound here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import SchedulingError
from scheduling.domain.identity import Principal
from scheduling.domain.schedule import ScheduleState
from scheduling.testing import open_storage
from simulation.worlds.service import ServiceWorld, build_world, definition, principal, seed_durable

GATE = "gate.schedule.scope_isolated"

OWNER = principal("alice")
SAME_TENANT = principal("bob")
OTHER_TENANT = principal("alice", tenant_id="tenant-b")


def envelope(exc: SchedulingError) -> tuple[str, str, str, dict[str, Any]]:
    return (type(exc).__name__, exc.code, exc.message, exc.details)


async def outcome(call: Callable[[], Awaitable[object]]) -> tuple[str, str, str, dict[str, Any]]:
    try:
        await call()
    except SchedulingError as exc:
        return envelope(exc)
    return ("returned", "", "", {})


def reads(world: ServiceWorld, who: Principal, schedule_id: UUID) -> dict[str, Callable[[], Any]]:
    return {
        "get": lambda: world.service.get(who, schedule_id),
        "occurrences": lambda: world.service.occurrences(who, schedule_id),
    }


@pytest.mark.postgres
@pytest.mark.gate(GATE, facet="read_isolation")
async def test_foreign_reads_equal_missing(pg_url: str, gate_evidence: GateEvidence) -> None:
    storage = open_storage(pg_url, pool_size=5)
    admin = storage.factory("trusted")
    try:
        await seed_durable(admin, [OWNER, SAME_TENANT, OTHER_TENANT])
        world = build_world(storage)
        owned = []
        for n, pause in enumerate((False, True, False)):
            s = (await world.service.create(OWNER, f"k{n}", definition(title=f"S{n}"))).schedule
            if pause:
                await world.service.pause(OWNER, s.id, 1)
            owned.append(s.id)
        # The owner sees them; this is what makes "not found" below meaningful.
        for sid in owned:
            assert (await world.service.get(OWNER, sid)).schedule.id == sid
        missing = UUID("00000000-0000-4000-8000-00000000dead")
        checked = 0
        for who in (SAME_TENANT, OTHER_TENANT, OWNER):
            baseline = {
                name: await outcome(call) for name, call in reads(world, who, missing).items()
            }
            assert all(env[0] == "NotFoundError" for env in baseline.values()), baseline
            if who is OWNER:
                continue
            for sid in owned:
                for name, call in reads(world, who, sid).items():
                    assert await outcome(call) == baseline[name], (who, name)
                    checked += 1
            listed = await world.service.list(who, states=frozenset(ScheduleState))
            assert not {item.schedule_id for item in listed.items} & set(owned)
            listed_all = await world.service.list(who)
            assert listed_all.items == []
        own = await world.service.list(OWNER)
        assert {item.schedule_id for item in own.items} == set(owned)
        gate_evidence.record("database", "postgresql (API role, forced RLS)")
        gate_evidence.record("foreign_reads_compared", checked)
        gate_evidence.record(
            "readers", ["same tenant, other principal", "other tenant, same principal id"]
        )
        gate_evidence.record("reads", ["get", "occurrences", "list"])
    finally:
        await storage.close()
