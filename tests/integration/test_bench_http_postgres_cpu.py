"""The HTTP bench's database figure (``postgres_cpu_ms_per_request``, ADR 2700) is the
database's: ``postgres_cpu_delta`` grows by what a query burns on the server, while
the client that only waits adds nothing to it.

Test of the test: the same reading taken from the client process
(``time.process_time()``, where a bench that timed only its own side would look) grows
by almost nothing over the same query, so the assertion tells the two apart.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from types import ModuleType

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from scheduling.testing import to_asyncpg_url
from testsupport.bench import load_bench

BURN = "SELECT count(*) FROM generate_series(1, 4000000) AS g(i) WHERE i % 7 = 3"


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip()
    except OSError:
        return ""


def _module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "bench_http_external.py", "bench_http_external")


def test_postgres_cpu_is_the_servers_not_the_clients(
    pg_empty_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _module(monkeypatch)

    async def run() -> tuple[float | None, float]:
        engine = create_async_engine(to_asyncpg_url(pg_empty_url), pool_size=1)
        try:
            async with engine.connect() as conn:
                backend = int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())
                # Only this backend: other tests' servers run beside this one (xdist)
                # and their backends come and go, which the bench's reading, alone on
                # its machine, never meets.
                server = {backend: bench.postgres_cpu()[backend]}
                client = time.process_time()
                await conn.execute(text(BURN))
                return (
                    bench.postgres_cpu_delta(server, {backend: bench.postgres_cpu()[backend]}),
                    time.process_time() - client,
                )
        finally:
            await engine.dispose()

    if not any(_comm(pid) == "postgres" for pid in os.listdir("/proc") if pid.isdigit()):
        pytest.skip("the test server's processes are not readable in /proc (not local)")
    server, client = asyncio.run(run())
    assert server is not None
    assert server >= 0.05, server  # generate_series over 4e6 rows: ~0.2-0.5 s of server CPU
    assert client < server / 3, (client, server)  # the client only waited


def test_a_backend_that_exited_makes_the_figure_unknown_not_smaller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bench = _module(monkeypatch)
    assert bench.postgres_cpu_delta({1: 1.0, 2: 5.0}, {1: 1.5, 3: 0.25}) is None
    assert bench.postgres_cpu_delta({1: 1.0}, {1: 1.5, 3: 0.25}) == 0.75
