"""A virtual clock implementing ``scheduling.ports.Clock`` (after trio's MockClock).

It starts at a given aware instant and only moves forward, either by an explicit
``advance``/``advance_to`` or, under the simulator's interleaver, by an autojump to the
earliest sleeper's deadline when no task can otherwise move. Without an interleaver
attached, ``sleep`` jumps at once: a lone task that sleeps is a task that waits.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Protocol

from simulation.engine.errors import SimulationError


class ClockDriver(Protocol):
    """The interleaver side of the clock: parks a simulated task until a deadline."""

    def drives_current_task(self) -> bool: ...

    async def sleep_until(self, deadline: datetime) -> None: ...


class VirtualClock:
    """Simulated UTC time. Contract: ``now()`` never decreases; moves are recorded."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None or start.utcoffset() is None:
            raise SimulationError("a virtual clock starts at an aware instant")
        self._now = start.astimezone(UTC)
        self._start = self._now
        self._driver: ClockDriver | None = None

    @property
    def start(self) -> datetime:
        return self._start

    def now(self) -> datetime:
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Suspend until the clock has advanced by ``seconds`` (negative counts as 0)."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        deadline = self._now + timedelta(seconds=seconds)
        if self._driver is not None and self._driver.drives_current_task():
            await self._driver.sleep_until(deadline)
            return
        self.advance_to(deadline)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> datetime:
        """Move forward by ``seconds``; a negative step is refused."""
        if seconds < 0:
            raise SimulationError(f"the virtual clock never goes back (asked {seconds}s)")
        return self.advance_to(self._now + timedelta(seconds=seconds))

    def advance_to(self, instant: datetime) -> datetime:
        """Move to ``instant`` (aware); an earlier instant is refused, the same is a no-op."""
        if instant.tzinfo is None or instant.utcoffset() is None:
            raise SimulationError("the virtual clock moves only to aware instants")
        instant = instant.astimezone(UTC)
        if instant < self._now:
            raise SimulationError(
                f"the virtual clock never goes back: {instant.isoformat()} < "
                f"{self._now.isoformat()}"
            )
        if instant != self._now:
            self._now = instant
        return self._now

    def attach(self, driver: ClockDriver | None) -> None:
        """Let an interleaver own the sleeps of its simulated tasks (``None`` detaches)."""
        self._driver = driver
