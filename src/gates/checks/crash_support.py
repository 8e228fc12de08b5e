"""Crash injection for the checks (not a test module): a unit-of-work factory that
counts every repository write and COMMIT of the units it begins, and raises ``Crash``
right after the chosen one (after a COMMIT: the work committed, the caller never
learns it). A discovery run (``after=None``) lists the writes; the check then crashes
after each in turn, so every point between two writes is a crash point.

A ``Hold`` instead parks the unit right after one named write (its row locks held,
nothing committed) until the check releases it: a transaction caught in flight.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from scheduling.domain.identity import Principal
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory

WRITES = frozenset(
    {
        "append",
        "append_once",
        "append_event",
        "add_checkpoint",
        "mutate",
        "insert",
        "create",
        "put",
        "save",
    }
)
"""Repository methods that write (their names across the repositories)."""


class Crash(Exception):
    """An injected crash of the process the factory serves."""


class _Counter:
    def __init__(self, after: int | None) -> None:
        self.after = after
        self.writes: list[str] = []

    def wrote(self, name: str) -> None:
        self.writes.append(name)
        if self.after is not None and len(self.writes) == self.after:
            raise Crash(f"crash after write #{self.after} ({name})")


@dataclass
class Hold:
    """Park the unit after its write named ``at`` (e.g. ``runs.save``) until
    ``release`` is set; ``reached`` is set when it parks."""

    at: str
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


class _Repository:
    def __init__(self, inner: Any, counter: _Counter, label: str, hold: Hold | None) -> None:
        self._inner, self._counter, self._label, self._hold = inner, counter, label, hold

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            result = await attr(*args, **kwargs)
            self._counter.wrote(f"{self._label}.{name}")
            if self._hold is not None and self._hold.at == f"{self._label}.{name}":
                self._hold.reached.set()
                await self._hold.release.wait()
            return result

        return write


class _Unit:
    """A unit of work whose writes and COMMIT are counted; the crash fires right after
    the chosen one (after COMMIT: the work committed, the caller never learns it)."""

    def __init__(self, inner: UnitOfWork, counter: _Counter, hold: Hold | None) -> None:
        self._inner, self._counter, self._hold = inner, counter, hold

    def __getattr__(self, name: str) -> Any:
        return _Repository(getattr(self._inner, name), self._counter, name, self._hold)

    async def commit(self) -> None:
        await self._inner.commit()
        self._counter.wrote("commit")

    async def rollback(self) -> None:
        await self._inner.rollback()

    async def __aenter__(self) -> _Unit:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._inner.__aexit__(et, e, tb)


class CrashingFactory:
    """A ``UnitOfWorkFactory`` over ``inner`` that crashes after its ``after``-th write
    (counted over every unit it begins; ``None``: never, just count), and parks at
    ``hold``'s write when given."""

    def __init__(
        self, inner: UnitOfWorkFactory, after: int | None, hold: Hold | None = None
    ) -> None:
        self._inner = inner
        self.counter = _Counter(after)
        self.hold = hold

    def begin(self, principal: Principal | None = None, *, tenant_id: str | None = None) -> Any:
        return _Unit(self._inner.begin(principal, tenant_id=tenant_id), self.counter, self.hold)

    async def dispose(self) -> None:
        return None
