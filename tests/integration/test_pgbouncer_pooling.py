"""Behind pgbouncer (issue 25 item 5, ADR 2230): ``release-check`` detects a pooler
that hands out a server connection per transaction (or per statement) and refuses it
with ``schedule.config.transaction_pooling``; session pooling and a direct connection
pass. Against a real pgbouncer 1.18 in each pool mode (the HA lane, ``.ci/ha-soak``,
installs it); skipped, saying so, where pgbouncer is not installed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from scheduling.adapters.postgres.release_check import connection_pooling
from scheduling.cli.release import release_problems
from scheduling.config import Settings, problem_codes
from simulation.provider._pgbouncer import Pgbouncer, find_pgbouncer, pgbouncer_in_front
from simulation.provider._private import PrivateCluster, private_cluster
from testsupport.logins import role_logins
from testsupport.production_env import GOOD

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(
        find_pgbouncer() is None,
        reason="pgbouncer is not installed (apt-get install pgbouncer; .ci/ha-soak does)",
    ),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    with private_cluster() as private:
        yield private


@contextlib.contextmanager
def bouncer(port: int, mode: str, *users: str) -> Iterator[Pgbouncer]:
    with pgbouncer_in_front("127.0.0.1", port, pool_mode=mode, users=users) as running:
        yield running


@pytest.mark.parametrize("mode", ["session", "transaction", "statement"])
def test_the_probe_reads_each_pool_mode(cluster: PrivateCluster, mode: str) -> None:
    url = cluster.server.url_for("postgres")
    assert asyncio.run(connection_pooling(url)) == "session"  # direct
    with bouncer(cluster.cluster.port, mode) as pooled:
        for _ in range(3):
            assert asyncio.run(connection_pooling(pooled.url_for(url))) == mode


def test_transaction_pooling_is_found_while_other_clients_are_busy(
    cluster: PrivateCluster,
) -> None:
    # Other clients keep taking and releasing server connections while the probe runs;
    # the probe still sees its backend shared or swapped, every time.
    url = cluster.server.url_for("postgres")
    with bouncer(cluster.cluster.port, "transaction") as pooled:
        through = pooled.url_for(url)

        async def busy(stop: asyncio.Event) -> None:
            conn = await asyncpg.connect(through, statement_cache_size=0)
            try:
                while not stop.is_set():
                    await conn.execute("SELECT pg_sleep(0.002)")
            finally:
                await conn.close()

        async def run() -> list[str]:
            stop = asyncio.Event()
            tasks = [asyncio.create_task(busy(stop)) for _ in range(4)]
            await asyncio.sleep(0.1)
            try:
                return [await connection_pooling(through) for _ in range(5)]
            finally:
                stop.set()
                await asyncio.gather(*tasks)

        assert asyncio.run(run()) == ["transaction"] * 5


@pytest.fixture
async def logins(pg_url: str) -> AsyncIterator[dict[str, str]]:
    async with role_logins(pg_url, "pb") as names:
        yield names


def _settings(pg_url: str, pooled: Pgbouncer, logins: dict[str, str]) -> Settings:
    def login(name: str) -> str:
        url = make_url(pg_url).set(username=name, password=None)
        return pooled.url_for(url.render_as_string(hide_password=False))

    return Settings.from_env(
        {
            **GOOD,
            "AGENT_SCHEDULE_DATABASE_URL": pg_url,
            "AGENT_SCHEDULE_SCHEDULER_DATABASE_URL": login(logins["scheduler"]),
            "AGENT_SCHEDULE_RUN_WORKER_DATABASE_URL": login(logins["run_worker"]),
        }
    )


async def test_release_check_refuses_transaction_pooling_and_passes_session_pooling(
    pg_url: str, logins: dict[str, str]
) -> None:
    port = make_url(pg_url).port
    assert port is not None
    with bouncer(port, "transaction", *logins.values()) as pooled:
        problems = await release_problems(_settings(pg_url, pooled, logins))
    assert problem_codes(problems) == ["schedule.config.transaction_pooling"] * 2, problems
    assert "run-worker login" in problems[0]
    assert "scheduler login" in problems[1]
    assert "session pooling" in problems[0]
    with bouncer(port, "session", *logins.values()) as pooled:
        assert await release_problems(_settings(pg_url, pooled, logins)) == []
