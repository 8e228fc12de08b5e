"""LISTEN/NOTIFY wake-ups (spec "Configuration and deployment"): best effort only.

``PostgresNotifier`` sends on fixed channels: ``scheduling_schedule_changed`` (create,
update, resume: wake schedule workers; sent after ``commit()`` on a connection of its
own) and ``scheduling_run_queued`` (the materializer: wake run workers). The
materializer's run notification is ``pg_notify`` inside the schedule transaction, on
its own pooled connection (``run_queued_in``): PostgreSQL delivers it at commit and
drops it on rollback, so no connection is opened per run (ADR 1700). A failure of a
post-commit send is logged and swallowed. ``PostgresWakeListener`` LISTENs on a
channel and sets an ``asyncio.Event``; a dropped connection only loses latency,
because every worker keeps its bounded table-scan fallback.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from uuid import UUID

import asyncpg
from sqlalchemy import text

from scheduling.adapters.postgres.prepared import Prepared
from scheduling.adapters.postgres.uow import PostgresUnitOfWork
from scheduling.ports.unit_of_work import UnitOfWork

SCHEDULE_CHANNEL = "scheduling_schedule_changed"
RUN_CHANNEL = "scheduling_run_queued"

_log = logging.getLogger(__name__)
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")
_NOTIFY_PREPARED = Prepared(_NOTIFY)


def to_libpq_url(url: str) -> str:
    """asyncpg wants ``postgresql://``; accept SQLAlchemy's ``postgresql+asyncpg://`` too."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class PostgresNotifier:
    """``ScheduleNotifier`` and the materializer's ``QueueNotifier`` over ``pg_notify``."""

    def __init__(self, url: str) -> None:
        self._url = to_libpq_url(url)

    async def schedule_changed(self, schedule_id: UUID) -> None:
        await self._send(SCHEDULE_CHANNEL, str(schedule_id))

    async def run_queued(self, run_id: UUID) -> None:
        await self._send(RUN_CHANNEL, str(run_id))

    async def run_queued_in(self, uow: UnitOfWork, run_id: UUID) -> None:
        """Queue the notification in ``uow``'s transaction (delivered at its commit)."""
        if not isinstance(uow, PostgresUnitOfWork):
            raise TypeError("run_queued_in needs the PostgreSQL unit of work")
        await uow.tx.fetch(_NOTIFY_PREPARED, {"channel": RUN_CHANNEL, "payload": str(run_id)})

    async def _send(self, channel: str, payload: str) -> None:
        try:
            conn = await asyncpg.connect(self._url)
            try:
                await conn.execute("SELECT pg_notify($1, $2)", channel, payload)
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError):
            _log.warning("notification on %s was not sent", channel, exc_info=True)


class PostgresWakeListener:
    """Sets ``event`` whenever a notification arrives on ``channel``."""

    def __init__(self, url: str, channel: str = SCHEDULE_CHANNEL) -> None:
        self._url = to_libpq_url(url)
        self.channel = channel
        self.event = asyncio.Event()
        self.received = 0
        self._conn: Any = None

    async def start(self) -> None:
        self._conn = await asyncpg.connect(self._url)
        await self._conn.add_listener(self.channel, self._on_notify)

    def _on_notify(self, *_: object) -> None:
        self.received += 1
        self.event.set()

    async def wait(self) -> None:
        """Return at the next notification (then re-arm)."""
        await self.event.wait()
        self.event.clear()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.remove_listener(self.channel, self._on_notify)
            finally:
                await conn.close()
