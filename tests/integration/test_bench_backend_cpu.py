"""The drain bench's server-CPU figure (bench/backend_cpu.py, ADR 2670) is the server's.

``BackendPids`` records the backend of every connection an engine opens; a query that
burns server CPU shows up in ``cpu_seconds`` while the client, which only waits, does
not. The test of the test: the same reading taken from the client's own pid (a
plausible wrong implementation, ``os.getpid()`` for the backend) grows by almost
nothing, so the assertion tells the two apart.
"""

from __future__ import annotations

import asyncio
import os
import time
from types import ModuleType

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling.testing import to_asyncpg_url
from testsupport.bench import load_bench

BURN = "SELECT count(*) FROM generate_series(1, 4000000) AS g(i) WHERE i % 7 = 3"


def _module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "backend_cpu.py", "bench_backend_cpu")


def test_server_cpu_is_the_backends_not_the_clients(
    pg_empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu = _module(monkeypatch)

    async def run() -> tuple[float | None, float | None, float, list[int]]:
        engine = create_async_engine(to_asyncpg_url(pg_empty_url), pool_size=2)
        pids = cpu.BackendPids()
        pids.attach(engine)
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
                before = pids.cpu_seconds()
                client_before = time.process_time()
                await conn.execute(text(BURN))
                client = time.process_time() - client_before
                after = pids.cpu_seconds()
        finally:
            await engine.dispose()
        return before, after, client, pids.pids

    before, after, client, seen = asyncio.run(run())
    assert len(seen) == 1
    assert seen[0] != os.getpid()
    if before is None or after is None:
        pytest.skip("the test server's backends are not readable in /proc (not local)")
    burned = after - before
    assert burned >= 0.05, burned  # generate_series over 4e6 rows: ~0.2-0.5 s of server CPU
    assert client < burned / 3, (client, burned)  # the client only waited


def test_an_unreadable_pid_is_none_not_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = _module(monkeypatch)
    pids = cpu.BackendPids()
    assert pids.cpu_seconds() == 0.0
    pids.pids.append(2**22 + 12345)  # above pid_max's default: no such process
    assert pids.cpu_seconds() is None
    assert cpu.process_cpu_seconds(os.getpid()) is not None
