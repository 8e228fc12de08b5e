"""The one clock adapter that reads the system clock (lint forbids it elsewhere)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime


class SystemClock:
    """Wall-clock time in UTC. Use only in production wiring and CLIs."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))
