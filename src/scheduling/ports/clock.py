"""The Clock port: the only way any code learns the current instant."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    """A source of the current instant.

    Contract: ``now()`` returns an aware UTC ``datetime``; successive calls on one
    clock never go backwards. ``sleep(seconds)`` suspends the caller until the
    clock has advanced by at least ``seconds`` (a virtual clock may jump).
    """

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...
