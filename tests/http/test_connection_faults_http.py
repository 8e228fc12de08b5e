"""The API while the database cannot serve (issue 25 finding 2; ADR 2220), over real
HTTP and real PostgreSQL, every fault the server's own:

* every backend of the API's pool terminated (``pg_terminate_backend``): the next
  requests answer 200, each dead pooled connection replaced when its unit of work
  opens, not one 503 per dead connection;
* a private server in smart shutdown (a session still open): it refuses new
  connections with a real 57P03; the API answers 503 ``schedule.database.unavailable``
  with ``Retry-After`` in the spec's envelope, never 500;
* the server stopped (connection refused): 503 with ``Retry-After``, never 500; after
  the restart, 200 again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx
import pytest

from scheduling.adapters.postgres.migrations import upgrade_to_head
from simulation.provider._private import PrivateCluster, private_cluster
from simulation.worlds.http import HttpWorld, http_world

pytestmark = pytest.mark.postgres


def _assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert response.headers.get("Retry-After") == "1"
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == "schedule.database.unavailable", response.text
    assert "Traceback" not in response.text


async def _terminate_others(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid, 5000) AS gone FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
    finally:
        await conn.close()
    return sum(bool(r["gone"]) for r in rows)


async def test_terminated_pool_backends_cost_no_503(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        # Warm the API's pool: several connections checked out and returned.
        warm = await asyncio.gather(*(world.call("GET", "/v1/schedules") for _ in range(4)))
        assert [r.status_code for r in warm] == [200] * 4
        terminated = await _terminate_others(pg_url)
        assert terminated >= 2, "the fault did not land"
        after = [await world.call("GET", "/v1/schedules") for _ in range(6)]
        assert [r.status_code for r in after] == [200] * 6, [r.text for r in after]


@pytest.fixture(scope="module")
def private() -> Iterator[PrivateCluster]:
    with private_cluster() as cluster:
        yield cluster


@pytest.fixture
async def world(private: PrivateCluster) -> AsyncIterator[tuple[HttpWorld, PrivateCluster, str]]:
    url = private.server.create_database()
    await upgrade_to_head(url)
    async with http_world(url) as served:
        yield served, private, url


def _running(private: PrivateCluster) -> None:
    if private.cluster.proc is None or private.cluster.proc.poll() is not None:
        private.restart()


async def test_a_server_that_refuses_answers_503_with_retry_after(
    world: tuple[HttpWorld, PrivateCluster, str], caplog: pytest.LogCaptureFixture
) -> None:
    served, private, url = world
    try:
        assert (await served.call("GET", "/v1/schedules")).status_code == 200
        # Smart shutdown with one session still open: new connections get a real 57P03
        # ("the database system is shutting down") until that session ends.
        held = await asyncpg.connect(url)
        await _terminate_others_but(held)
        proc = private.cluster.proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGTERM)
        with pytest.raises(asyncpg.exceptions.CannotConnectNowError):
            await _until_refused(url)
        with caplog.at_level(logging.WARNING):
            refused = await served.call("GET", "/v1/schedules")
        _assert_unavailable(refused)
        await held.close()
        await asyncio.to_thread(proc.wait, 60)
        private.cluster.proc = None
        # Stopped: nothing listens (connection refused).
        stopped = await served.call("GET", "/v1/schedules")
        _assert_unavailable(stopped)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        await asyncio.to_thread(private.restart)
        back = await served.call("GET", "/v1/schedules")
        assert back.status_code == 200, back.text
    finally:
        _running(private)


async def _terminate_others_but(held: asyncpg.Connection) -> None:
    await held.fetch(
        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
        " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
    )


async def _until_refused(url: str) -> None:
    """Connect until the postmaster has taken its signal (then a connect raises)."""
    for _ in range(500):
        probe = await asyncpg.connect(url)
        await probe.close()
        await asyncio.sleep(0.01)
