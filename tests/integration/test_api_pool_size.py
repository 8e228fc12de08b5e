"""The API's connection pool holds ``AGENT_SCHEDULE_API_POOL_SIZE`` connections (ADR 2620)
and keeps the ones a burst opens beyond it (ADR 2720).

SQLAlchemy's overflow closes a connection at check-in whenever the pool's size are idle,
so a steady load above the pool keeps starting new server backends. Seen from the
server: with the pool at N, N concurrent units of work over many rounds use at most N
backends; with a pool of 5 the same load of 8 now does too (the burst headroom keeps
its connections), where an engine with SQLAlchemy's overflow (the builder before ADR
2720, the test of the test) uses many more; beyond the pool and its headroom a unit of
work waits for a connection instead of failing.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling import bootstrap as b
from scheduling import config as c
from scheduling.adapters.postgres.uow import BURST_HEADROOM, PostgresUnitOfWorkFactory
from scheduling.adapters.postgres.urls import to_asyncpg_url
from scheduling.config import ConfigurationError, Settings
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import START

CONCURRENT = 8
ROUNDS = 25


def _env(pg_url: str, **extra: str) -> dict[str, str]:
    return {
        "AGENT_SCHEDULE_API_ENABLED": "1",
        "AGENT_SCHEDULE_STORAGE": "postgres",
        "AGENT_SCHEDULE_DATABASE_URL": pg_url,
        **extra,
    }


def test_the_default_and_the_bounds() -> None:
    assert Settings.from_env({}).api_pool_size == c.API_POOL_SIZE == 10
    assert Settings.from_env({"AGENT_SCHEDULE_API_POOL_SIZE": "1"}).api_pool_size == 1
    for bad in ("0", "-3", str(c.MAX_API_POOL_SIZE + 1), "many", "2.5"):
        with pytest.raises(ConfigurationError) as refused:
            Settings.from_env({"AGENT_SCHEDULE_API_POOL_SIZE": bad})
        (problem,) = refused.value.details["problems"]
        assert problem.startswith(f"{c.UNPARSEABLE}: AGENT_SCHEDULE_API_POOL_SIZE: ")


async def _backends_used(units: UnitOfWorkFactory) -> set[int]:
    """The server backends ``CONCURRENT`` units of work ran on, over ``ROUNDS`` rounds
    in which they all hold their connection at once."""
    used: set[int] = set()
    held = asyncio.Barrier(CONCURRENT)

    async def one() -> None:
        async with units.begin(tenant_id="pool-tenant") as uow:
            row = (await uow.tx.execute(text("SELECT pg_backend_pid() AS pid"))).one()  # type: ignore[attr-defined]
            used.add(int(row.pid))
            await held.wait()  # every connection is out at once: the pool's worst case

    for _ in range(ROUNDS):
        await asyncio.gather(*(one() for _ in range(CONCURRENT)))
    return used


@pytest.mark.postgres
@pytest.mark.parametrize("size", [CONCURRENT, 12])
async def test_concurrent_requests_reuse_the_pools_connections(pg_url: str, size: int) -> None:
    env = _env(pg_url, AGENT_SCHEDULE_API_POOL_SIZE=str(size))
    role = b.build_api(Settings.from_env(env), clock=VirtualClock(START), ids=SeededIds("pool"))
    try:
        used = await _backends_used(role.uow)
    finally:
        await role.close()
    assert len(used) <= CONCURRENT, f"{len(used)} backends for {CONCURRENT} at once"


@pytest.mark.postgres
async def test_a_burst_above_the_pool_keeps_its_connections(pg_url: str) -> None:
    """8 at once through a pool of 5: the 3 beyond it are opened once and kept."""
    env = _env(pg_url, AGENT_SCHEDULE_API_POOL_SIZE="5")
    role = b.build_api(Settings.from_env(env), clock=VirtualClock(START), ids=SeededIds("pool"))
    try:
        used = await _backends_used(role.uow)
    finally:
        await role.close()
    assert len(used) <= CONCURRENT, f"{len(used)} backends for {CONCURRENT} at once"


@pytest.mark.postgres
async def test_an_overflow_pool_churns(pg_url: str) -> None:
    """The test of the test: the same load through SQLAlchemy's overflow (pool of 5,
    10 overflow closed at check-in, the engine before ADR 2720) starts new backends
    round after round, which the assertions above refuse."""
    engine = create_async_engine(to_asyncpg_url(pg_url), pool_size=5)
    try:
        used = await _backends_used(PostgresUnitOfWorkFactory(engine))
    finally:
        await engine.dispose()
    assert len(used) > CONCURRENT


@pytest.mark.postgres
async def test_beyond_the_pool_and_its_headroom_a_unit_waits(pg_url: str) -> None:
    """Two more units of work than a pool of 1 and its headroom can hold run at once:
    the last wait for a connection and all finish; never more backends than that."""
    factory = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    used: set[int] = set()

    async def one() -> None:
        async with factory.begin(tenant_id="pool-tenant") as uow:
            row = (
                await uow.tx.execute(text("SELECT pg_backend_pid() AS pid, pg_sleep(0.05)"))
            ).one()
            used.add(int(row.pid))

    try:
        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(BURST_HEADROOM + 3))), 20)
    finally:
        await factory.dispose()
    assert len(used) <= 1 + BURST_HEADROOM
