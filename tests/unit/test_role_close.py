"""A role closes the storage it opened and leaves an injected one to its caller
(ADR 2171, ADR 2350: one ``OwnedStorage.close`` for the API, scheduler and run-worker
roles)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from scheduling import bootstrap as b
from scheduling.bootstrap.owned import OwnedStorage
from scheduling.config import Settings
from scheduling.storage import MemoryStorage
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds


class CountingStorage(MemoryStorage):
    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


class CountingListener:
    received = 0

    def __init__(self) -> None:
        self.closed = 0

    async def start(self) -> None: ...

    async def wait(self) -> None: ...

    async def close(self) -> None:
        self.closed += 1


def roles(storage: CountingStorage) -> list[Any]:
    nothing: Any = None
    settings = Settings.from_env({f"AGENT_SCHEDULE_{r}_ENABLED": "true" for r in ("API", "WORKER")})
    clock, ids = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC)), SeededIds("close")
    return [
        b.build_api(settings, clock=clock, ids=ids, storage=storage),
        b.build_scheduler(b.SchedulerSettings.of(settings), clock=clock, ids=ids, storage=storage),
        # The run worker refuses memory storage; its close reads only these two fields.
        b.RunWorkerRole(nothing, nothing, 1, storage.uow, storage, owns_storage=False),
    ]


async def closes(role: Any, *, owns: bool) -> int:
    """How many times closing ``role`` (owning its storage or not) closes that storage."""
    before: int = role.storage.closed
    await dataclasses.replace(role, owns_storage=owns).close()
    after: int = role.storage.closed
    return after - before


async def test_each_role_closes_what_it_owns_only() -> None:
    for role in roles(CountingStorage()):
        assert isinstance(role, OwnedStorage)
        assert not role.owns_storage, type(role).__name__  # injected: the caller's
        assert await closes(role, owns=False) == 0, type(role).__name__
        assert await closes(role, owns=True) == 1, type(role).__name__


async def test_the_scheduler_closes_its_listener_as_well() -> None:
    role = roles(CountingStorage())[1]
    listener = CountingListener()
    await dataclasses.replace(role, listener=listener, owns_storage=True).close()
    assert (listener.closed, role.storage.closed) == (1, 1)


async def test_the_check_sees_a_role_closing_an_injected_storage() -> None:
    """The test of the test: a close that ignores ownership fails the check."""

    @dataclasses.dataclass
    class Careless(OwnedStorage):
        storage: CountingStorage
        owns_storage: bool

        async def close(self) -> None:
            await self.storage.close()

    assert await closes(Careless(CountingStorage(), owns_storage=False), owns=False) == 1
