"""The best-effort scheduler wake-up port (spec "Configuration and deployment").

Create, update and resume call ``schedule_changed`` after their transaction commits,
so a sleeping scheduler may look again before its fallback poll. Correctness never
depends on it: the scheduler's bounded table scan finds every due schedule anyway.
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID


class ScheduleNotifier(Protocol):
    """Contract: best effort. It may drop a notification; it must not raise for a
    delivery failure (the caller also swallows errors), and it sees no schedule
    content, only the id."""

    async def schedule_changed(self, schedule_id: UUID) -> None: ...


class NullNotifier:
    """Sends nothing: the development default until LISTEN/NOTIFY is wired."""

    async def schedule_changed(self, schedule_id: UUID) -> None:
        return None
