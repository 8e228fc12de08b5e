"""LISTEN/NOTIFY wake-ups (spec "Configuration and deployment"): best effort only.

``PostgresNotifier`` sends on fixed channels: ``scheduling_schedule_changed`` (create,
update, resume: wake schedule workers; sent after ``commit()`` on a connection of its
own) and ``scheduling_run_queued`` (wake run workers). A run's notification is not sent
by the materializer at all: the ``runs`` insert trigger (revision 0007, ADR 1750)
queues it inside the inserting transaction, so PostgreSQL delivers it at commit, drops
it on rollback, and neither a statement nor a connection is spent on it. A failure of
a post-commit send is logged and swallowed. ``PostgresWakeListener`` LISTENs on a
channel and sets an ``asyncio.Event``; a dropped LISTEN connection is re-established
with a bounded backoff on the Clock (ADR 1913), and until then only latency is lost,
because every worker keeps its bounded table-scan fallback.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from scheduling.instance import current
from scheduling.ports.clock import Clock

SCHEDULE_CHANNEL = "scheduling_schedule_changed"
RUN_CHANNEL = "scheduling_run_queued"

_log = logging.getLogger(__name__)


def to_libpq_url(url: str) -> str:
    """asyncpg wants ``postgresql://``; accept SQLAlchemy's ``postgresql+asyncpg://`` too."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


class PostgresNotifier:
    """``ScheduleNotifier`` over ``pg_notify``. Its connections are named
    ``application_name`` (default: the process's own name, ``scheduling.instance``)."""

    def __init__(self, url: str, *, application_name: str | None = None) -> None:
        self._url = to_libpq_url(url)
        self._settings = {"application_name": application_name or current().application_name()}

    async def schedule_changed(self, schedule_id: UUID) -> None:
        await self._send(SCHEDULE_CHANNEL, str(schedule_id))

    async def _send(self, channel: str, payload: str) -> None:
        try:
            conn = await asyncpg.connect(self._url, server_settings=self._settings)
            try:
                await conn.execute("SELECT pg_notify($1, $2)", channel, payload)
            finally:
                await conn.close()
        except (OSError, asyncpg.PostgresError):
            _log.warning("notification on %s was not sent", channel, exc_info=True)


@dataclass(frozen=True)
class ReconnectSettings:
    """The listener's bounded reconnect backoff: ``base`` doubling up to ``cap`` seconds
    between attempts, slept on the ``Clock``; attempts continue until ``close()``."""

    base_seconds: float = 0.1
    cap_seconds: float = 5.0

    def delay(self, attempt: int) -> float:
        return min(self.cap_seconds, self.base_seconds * float(2**attempt))


class PostgresWakeListener:
    """Sets ``event`` whenever a notification arrives on ``channel``.

    The LISTEN connection is re-established when it drops (server crash or restart,
    failover, terminated backend): asyncpg calls the termination listener when the
    socket closes, and a background task reconnects with the bounded backoff of
    ``reconnect`` on ``clock`` (through a multi-host URL it lands on the new primary).
    Notifications sent while it was away are lost, so a successful reconnection sets
    ``event`` once: the worker scans at once instead of waiting for its poll. The LISTEN
    connection is named ``application_name`` (default: the process's own name).
    """

    def __init__(
        self,
        url: str,
        channel: str = SCHEDULE_CHANNEL,
        *,
        clock: Clock,
        reconnect: ReconnectSettings | None = None,
        application_name: str | None = None,
    ) -> None:
        self._url = to_libpq_url(url)
        self._settings = {"application_name": application_name or current().application_name()}
        self.channel = channel
        self.event = asyncio.Event()
        self.received = 0
        self.lost = 0
        """How many times the LISTEN connection dropped."""
        self.reconnects = 0
        """How many times it was re-established."""
        self.failed_reconnects = 0
        self._clock = clock
        self._reconnect = reconnect or ReconnectSettings()
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        self._closing = False
        await self._connect()

    async def _connect(self) -> None:
        conn = await asyncpg.connect(self._url, server_settings=self._settings)
        try:
            await conn.add_listener(self.channel, self._on_notify)
        except BaseException:
            conn.terminate()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn

    def _on_notify(self, *_: object) -> None:
        self.received += 1
        self.event.set()

    def _on_lost(self, conn: object) -> None:
        if self._closing or conn is not self._conn:
            return
        self._conn = None
        self.lost += 1
        _log.warning("wake listener on %s lost its connection; reconnecting", self.channel)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._reconnect_loop())

    async def _reconnect_loop(self) -> None:
        attempt = 0
        while not self._closing:
            await self._clock.sleep(self._reconnect.delay(attempt))
            try:
                await self._connect()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                attempt += 1
                self.failed_reconnects += 1
                _log.warning("wake listener reconnect %d failed", attempt, exc_info=True)
                continue
            self.reconnects += 1
            _log.warning("wake listener on %s reconnected", self.channel)
            self.event.set()
            return

    async def wait(self) -> None:
        """Return at the next notification (then re-arm)."""
        await self.event.wait()
        self.event.clear()

    async def close(self) -> None:
        self._closing = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_lost)
            try:
                await conn.remove_listener(self.channel, self._on_notify)
            finally:
                await conn.close()
