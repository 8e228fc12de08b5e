"""The durable principal directory read through an open unit of work (``joined``, ADR
2380) answers as its own-transaction ``current`` does, over both unit-of-work adapters,
and reads the row again on every call (revocation at the next request, ADR 1511); the
static directory's ``joined`` is itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from scheduling.adapters.memory import MemoryUnitOfWorkFactory
from scheduling.adapters.memory.directories import StaticPrincipalDirectory
from scheduling.adapters.postgres.directories import DurablePrincipalDirectory
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.identity import Principal
from scheduling.ports.records import PrincipalRecord
from scheduling.ports.unit_of_work import UnitOfWorkFactory

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ALICE = Principal("tenant-a", "alice")


@pytest.fixture(params=["memory", "postgres"])
async def factory(request: pytest.FixtureRequest) -> AsyncIterator[UnitOfWorkFactory]:
    if request.param == "memory":
        yield MemoryUnitOfWorkFactory()
        return
    made = PostgresUnitOfWorkFactory.from_url(request.getfixturevalue("pg_url"), pool_size=2)
    try:
        yield made
    finally:
        await made.dispose()


async def _put(factory: UnitOfWorkFactory, enabled: bool, scopes: set[str]) -> None:
    async with factory.begin() as uow:
        await uow.principals.put(
            PrincipalRecord(
                ALICE.tenant_id, ALICE.principal_id, enabled, frozenset(scopes), {}, T0, T0
            )
        )
        await uow.commit()


async def test_joined_answers_as_current_and_reads_again(factory: UnitOfWorkFactory) -> None:
    directory = DurablePrincipalDirectory(factory)
    await _put(factory, True, {"schedule.read"})
    own = await directory.current(ALICE.tenant_id, ALICE.principal_id)
    async with factory.begin(ALICE) as uow:
        joined = directory.joined(uow.principals)
        assert await joined.current(ALICE.tenant_id, ALICE.principal_id) == own
        assert await joined.current(ALICE.tenant_id, "nobody") is None
    assert own is not None
    assert own.scopes == {"schedule.read"}
    await _put(factory, False, set())  # revoked between two requests
    async with factory.begin(ALICE) as uow:
        revoked = await directory.joined(uow.principals).current(
            ALICE.tenant_id, ALICE.principal_id
        )
    assert revoked is not None
    assert not revoked.enabled
    assert not revoked.scopes
    assert revoked.authority_version != own.authority_version


def test_a_static_directory_joins_as_itself() -> None:
    static = StaticPrincipalDirectory()
    assert static.joined(MemoryUnitOfWorkFactory().begin().principals) is static
