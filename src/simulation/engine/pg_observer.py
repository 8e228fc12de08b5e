"""What the interleaver asks PostgreSQL: who is blocked on a lock, and backend control."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg

from simulation.engine.errors import SimulationError, SimulationStuck

# Pooled backends not yet released by a closed client: still in a statement or a
# transaction, or holding a lock (a session-level advisory lock outlives both). Not
# held: this observer's own backend, and one that began a statement after $2 (the
# client had closed by then, so the pooler's reset or a new client sent it).
_HELD = """
SELECT a.pid, a.state FROM pg_stat_activity AS a
WHERE a.pid = ANY($1::int[]) AND a.pid <> pg_backend_pid()
  AND (a.query_start IS NULL OR a.query_start <= $2)
  AND (a.state IS DISTINCT FROM 'idle' OR EXISTS (SELECT FROM pg_locks AS l WHERE l.pid = a.pid))
"""


class PgObserver:
    """Admin-side queries over one dedicated connection (never a worker's)."""

    def __init__(
        self, connection: Any, *, gone_timeout: float = 10.0, url: str | None = None
    ) -> None:
        self._conn = connection
        self._gone_timeout = gone_timeout
        self._url = url

    @classmethod
    async def connect(cls, url: str) -> PgObserver:
        return cls(await cls._open(url), url=url)

    @staticmethod
    async def _open(url: str) -> Any:
        return await asyncpg.connect(url, server_settings={"application_name": "sim-admin"})

    async def reconnect(self) -> None:
        """A new admin connection after the server crashed (the old one died with it)."""
        if self._url is None:
            raise SimulationError("the observer cannot reconnect: it was given no URL")
        old, self._conn = self._conn, await self._open(self._url)
        old.terminate()

    async def close(self) -> None:
        if not self._conn.is_closed():
            await self._conn.close()

    async def blocked(self, pids: Sequence[int]) -> set[int]:
        """The subset of ``pids`` whose backend waits on a lock held by another."""
        if not pids:
            return set()
        rows = await self._conn.fetch(
            "SELECT pid FROM unnest($1::int[]) AS pid WHERE cardinality(pg_blocking_pids(pid)) > 0",
            list(pids),
        )
        return {int(r["pid"]) for r in rows}

    async def terminate(self, pids: Sequence[int]) -> None:
        """pg_terminate_backend each pid, then wait until they are gone (locks released)."""
        if pids:
            await self._conn.execute(
                "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", list(pids)
            )
        await self.wait_gone(pids)

    async def wait_gone(self, pids: Sequence[int]) -> None:
        """Wait until no backend in ``pids`` exists, so its locks are released for sure."""
        if not pids:
            return
        deadline = time.monotonic() + self._gone_timeout
        while True:
            alive = await self._conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])", list(pids)
            )
            if not alive:
                return
            if time.monotonic() > deadline:
                raise SimulationStuck(f"{alive} backend(s) did not exit")
            await asyncio.sleep(0.0005)

    async def wait_released(self, pids: Sequence[int], linked: Callable[[], set[int]]) -> None:
        """Wait until each pooled backend in ``pids``, whose client connection is closed,
        is released: exited, idle outside a transaction holding no lock (the pooler
        keeps it), or serving another client (``linked()``: watched connections now on
        it; or this observer; or a statement begun after the close). Behind a pooler a
        closed client's backend may never exit, so ``wait_gone`` could wait forever."""
        closed_by = await self._conn.fetchval("SELECT clock_timestamp()")
        deadline = time.monotonic() + self._gone_timeout
        while True:
            held = await self._conn.fetch(_HELD, list(pids), closed_by)
            busy = sorted(str(r["state"]) for r in held if int(r["pid"]) not in linked())
            if not busy:
                return
            if time.monotonic() > deadline:
                states = ", ".join(busy)
                raise SimulationStuck(f"{len(busy)} pooled backend(s) not released ({states})")
            await asyncio.sleep(0.0005)

    async def server_version(self) -> str:
        return str(await self._conn.fetchval("SHOW server_version"))
