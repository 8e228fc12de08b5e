"""The best-effort scheduler wake-up ports (spec "Configuration and deployment").

Create, update and resume wake sleeping schedulers so they may look again before
their fallback poll. Correctness never depends on it: the scheduler's bounded table
scan finds every due schedule anyway.

``ScheduleWakeups`` is the wake-up itself, joined to the writing unit of work
(``uow.wakeups``): queued inside the transaction, delivered iff it commits, dropped on
rollback, and never a connection of its own (ADR 2310). ``ScheduleNotifier`` is an
observer the service tells after the commit (tests record with it); none is wired in
production.
"""

from __future__ import annotations

from typing import Protocol
from uuid import UUID


class ScheduleWakeups(Protocol):
    """Contract: ``schedule_changed`` inside an open unit of work queues one wake-up
    for ``schedule_id``; it is delivered when that unit of work commits and never when
    it rolls back. Best effort: an adapter may skip one it could not deliver without
    failing the commit (PostgreSQL skips it when the notification queue is half full,
    so the commit never fails on a full queue). It sees no schedule content, only
    the id."""

    async def schedule_changed(self, schedule_id: UUID) -> None: ...


class ScheduleNotifier(Protocol):
    """Contract: best effort, told after the commit. It may drop a notification; it
    must not raise for a delivery failure (the caller also swallows errors), and it sees
    no schedule content, only the id."""

    async def schedule_changed(self, schedule_id: UUID) -> None: ...


class NullNotifier:
    """Tells nobody: the default (the wake-up itself rides the unit of work)."""

    async def schedule_changed(self, schedule_id: UUID) -> None:
        return None
