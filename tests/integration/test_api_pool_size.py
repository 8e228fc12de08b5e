"""The API's connection pool holds ``AGENT_SCHEDULE_API_POOL_SIZE`` connections (ADR 2620).

A pool smaller than the requests served at once makes each request beyond it open a
connection (the pool's overflow) and close it on check-in, so a steady load of N
concurrent requests keeps starting new server backends. Seen from the server: with the
pool at N, N concurrent units of work over many rounds use at most N backends; with a
pool of 5 (the size before this setting) the same load uses many more.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from scheduling import bootstrap as b
from scheduling import config as c
from scheduling.config import ConfigurationError, Settings
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


async def _backends_used(role: b.ApiRole) -> set[int]:
    """The server backends ``CONCURRENT`` units of work of the API role ran on, over
    ``ROUNDS`` rounds in which they all hold their connection at once."""
    used: set[int] = set()
    held = asyncio.Barrier(CONCURRENT)

    async def one() -> None:
        async with role.uow.begin(tenant_id="pool-tenant") as uow:
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
        used = await _backends_used(role)
    finally:
        await role.close()
    assert len(used) <= CONCURRENT, f"{len(used)} backends for {CONCURRENT} at once"


@pytest.mark.postgres
async def test_a_pool_smaller_than_the_load_churns(pg_url: str) -> None:
    """The test of the test: the same load through a pool of 5 (the old size) starts
    new backends round after round, which the assertion above would refuse."""
    env = _env(pg_url, AGENT_SCHEDULE_API_POOL_SIZE="5")
    role = b.build_api(Settings.from_env(env), clock=VirtualClock(START), ids=SeededIds("pool"))
    try:
        used = await _backends_used(role)
    finally:
        await role.close()
    assert len(used) > CONCURRENT
