"""The deployment key ring (ADR 2100): revision 0008's seeded keys read through the API
role agree across instances, differ by purpose, are cached per process and cannot be
changed by the API role; the memory ring is random per instance; ``build_api`` wires
the ring the storage calls for."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from scheduling import bootstrap as b
from scheduling.adapters.memory.keys import MemoryKeyRing
from scheduling.adapters.postgres.keys import PostgresKeyRing
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.config import Settings
from scheduling.domain.errors import SchedulingError, UnavailableError
from scheduling.domain.identity import Principal
from scheduling.ports.keys import HTTP_CURSOR, IDEMPOTENCY_KEY, KEY_MISSING, PURPOSES, TOOL_CURSOR
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import START

API = role_names().api


class CountingFactory(PostgresUnitOfWorkFactory):
    """The API role's factory, counting the units of work begun."""

    begun = 0

    def begin(
        self, principal: Principal | None = None, *, tenant_id: str | None = None
    ) -> PostgresUnitOfWork:
        self.begun += 1
        return super().begin(principal, tenant_id=tenant_id)


async def test_memory_ring_is_stable_per_instance_and_differs_by_purpose() -> None:
    ring, other = MemoryKeyRing(), MemoryKeyRing()
    keys = [await ring.key(p) for p in PURPOSES]
    assert all(len(k) == 32 for k in keys)
    assert len(set(keys)) == len(PURPOSES)
    assert [await ring.key(p) for p in PURPOSES] == keys
    assert await other.key(TOOL_CURSOR) != await ring.key(TOOL_CURSOR)
    with pytest.raises(UnavailableError) as missing:
        await ring.key("no.such.purpose")
    assert missing.value.code == KEY_MISSING


@pytest.mark.postgres
async def test_two_api_instances_on_one_database_read_the_same_keys(pg_url: str) -> None:
    first = CountingFactory.from_url(pg_url, assume_role=API, pool_size=1)
    second = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=API, pool_size=1)
    try:
        assert isinstance(first, CountingFactory)
        a, b_ring = PostgresKeyRing(first), PostgresKeyRing(second)
        ours = {p: await a.key(p) for p in (TOOL_CURSOR, HTTP_CURSOR, IDEMPOTENCY_KEY)}
        theirs = {p: await b_ring.key(p) for p in (TOOL_CURSOR, HTTP_CURSOR, IDEMPOTENCY_KEY)}
        assert ours == theirs
        assert all(len(k) == 32 for k in ours.values())
        assert len(set(ours.values())) == 3
        # Cached in-process after the first read: no further transaction.
        reads = first.begun
        assert await a.key(TOOL_CURSOR) == ours[TOOL_CURSOR]
        assert first.begun == reads == 3
        with pytest.raises(UnavailableError) as missing:
            await a.key("no.such.purpose")
        assert missing.value.code == KEY_MISSING
        # The API role reads the keys and can change none of them.
        for statement in (
            "UPDATE deployment_keys SET key = key",
            "DELETE FROM deployment_keys",
            "INSERT INTO deployment_keys VALUES ('x', sha256('x'::bytea), now())",
        ):
            with pytest.raises(SchedulingError):
                async with second.begin() as uow:
                    await uow.tx.execute(text(statement))
    finally:
        await first.dispose()
        await second.dispose()


@pytest.mark.postgres
async def test_only_the_api_role_may_read_the_keys(pg_url: str) -> None:
    roles = role_names()
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    try:
        async with admin.begin() as uow:
            rows = (
                await uow.tx.execute(
                    text(
                        "SELECT r.rolname, has_table_privilege(r.oid, 'deployment_keys', p)"
                        " AS ok, p FROM pg_roles r, unnest(ARRAY['SELECT', 'INSERT', 'UPDATE',"
                        " 'DELETE']) AS p WHERE r.rolname = ANY(:roles)"
                    ),
                    {"roles": [roles.api, roles.scheduler, roles.maintenance, roles.run_worker]},
                )
            ).all()
        granted = {(r.rolname, r.p) for r in rows if r.ok}
        assert granted == {(roles.api, "SELECT")}
    finally:
        await admin.dispose()


@pytest.mark.postgres
async def test_build_api_wires_the_postgres_ring_and_memory_the_memory_ring(pg_url: str) -> None:
    clock, ids = VirtualClock(START), SeededIds("keys")
    memory_env = {"AGENT_SCHEDULE_API_ENABLED": "1", "AGENT_SCHEDULE_STORAGE": "memory"}
    memory = b.build_api(Settings.from_env(memory_env), clock=clock, ids=ids)
    assert isinstance(memory.keys, MemoryKeyRing)
    env = {
        "AGENT_SCHEDULE_API_ENABLED": "1",
        "AGENT_SCHEDULE_STORAGE": "postgres",
        "AGENT_SCHEDULE_DATABASE_URL": pg_url,
    }
    api = b.build_api(Settings.from_env(env), clock=clock, ids=ids)
    direct = PostgresUnitOfWorkFactory.from_url(pg_url, assume_role=API, pool_size=1)
    try:
        assert isinstance(api.keys, PostgresKeyRing)
        assert await api.keys.key(TOOL_CURSOR) == await PostgresKeyRing(direct).key(TOOL_CURSOR)
    finally:
        await api.close()
        await direct.dispose()
