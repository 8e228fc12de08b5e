"""What the interleaver asks PostgreSQL: who is blocked on a lock, and backend control."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import asyncpg

from simulation.engine.errors import SimulationError, SimulationStuck


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

    async def server_version(self) -> str:
        return str(await self._conn.fetchval("SHOW server_version"))
