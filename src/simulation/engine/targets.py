"""Where executions get their database: one reused URL, or a fresh one each time."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol


class DatabaseTarget(Protocol):
    """Hands out a database URL per execution and takes it back afterwards."""

    async def acquire(self) -> str: ...

    async def release(self, url: str) -> None: ...


class SharedDatabase:
    """Every execution uses one database; the scenario's setup must reset its state."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def acquire(self) -> str:
        return self.url

    async def release(self, url: str) -> None:
        return None


class FreshDatabases:
    """A new database per execution (e.g. a clone of a migrated template)."""

    def __init__(
        self, create: Callable[[], Awaitable[str]], drop: Callable[[str], Awaitable[None]]
    ) -> None:
        self._create = create
        self._drop = drop

    async def acquire(self) -> str:
        return await self._create()

    async def release(self, url: str) -> None:
        await self._drop(url)


class ProvidesDatabases(Protocol):
    """The part of ``simulation.provider.DatabaseServer`` used here (synchronous)."""

    def create_database(self, template: str | None = None) -> str: ...

    def drop_database(self, url: str) -> None: ...


def fresh_databases(server: ProvidesDatabases, template: str | None = None) -> FreshDatabases:
    """One new database per execution from the provider (cloned from ``template``)."""

    async def create() -> str:
        return await asyncio.to_thread(server.create_database, template)

    async def drop(url: str) -> None:
        await asyncio.to_thread(server.drop_database, url)

    return FreshDatabases(create, drop)
