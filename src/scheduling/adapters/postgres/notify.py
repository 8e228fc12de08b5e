"""LISTEN/NOTIFY wake-ups (spec "Configuration and deployment"): best effort only.

Two fixed channels: ``scheduling_schedule_changed`` (create, update, resume: wake
schedule workers) and ``scheduling_run_queued`` (wake run workers). Neither costs a
connection. A schedule's wake-up is ``PostgresWakeups`` (``uow.wakeups``): its
``pg_notify`` rides the writing transaction's ``COMMIT`` round trip (ADR 2310), so
PostgreSQL delivers it iff that commits and not one statement more is sent. A run's is
the ``runs`` insert trigger's (revision 0007, ADR 1750), queued inside the inserting
transaction the same way. ``PostgresNotifier`` sends one notification on a connection
of its own (tests, tools); a failure is logged and swallowed. ``PostgresWakeListener``
LISTENs on a channel and sets an ``asyncio.Event``; a dropped LISTEN connection is
re-established with a bounded backoff on the Clock (ADR 1913), and until then only
latency is lost, because every worker keeps its bounded table-scan fallback.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg

from scheduling.adapters.postgres.errors import classify
from scheduling.adapters.postgres.transaction import Transaction, literal
from scheduling.instance import current
from scheduling.ports.clock import Clock

SCHEDULE_CHANNEL = "scheduling_schedule_changed"
RUN_CHANNEL = "scheduling_run_queued"

_log = logging.getLogger(__name__)


def to_libpq_url(url: str) -> str:
    """asyncpg wants ``postgresql://``; accept SQLAlchemy's ``postgresql+asyncpg://`` too."""
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


MAX_QUEUE_USAGE = 0.5
"""Above this share of the server's notification queue a wake-up is skipped: a full
queue fails the ``COMMIT`` that notifies, and a wake-up must never fail a write."""


class PostgresWakeups:
    """``ScheduleWakeups`` over the unit of work's own transaction (ADR 2310)."""

    def __init__(self, tx: Transaction, *, max_queue_usage: float = MAX_QUEUE_USAGE) -> None:
        self._tx = tx
        self._guard = repr(float(max_queue_usage))

    async def schedule_changed(self, schedule_id: UUID) -> None:
        # Only fixed text and a UUID's canonical form: nothing a caller wrote.
        payload = literal(str(UUID(str(schedule_id))))
        self._tx.at_commit(
            f"SELECT pg_notify({literal(SCHEDULE_CHANNEL)}, {payload})"
            f" WHERE pg_notification_queue_usage() < {self._guard}"
        )


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
        except (OSError, asyncpg.PostgresError) as exc:
            fault = classify(exc)
            # A connection fault is one line; anything else keeps its traceback.
            _log.warning(
                "notification on %s was not sent%s",
                channel,
                "" if fault is None else f": {fault}",
                exc_info=fault is None,
            )


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
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
                attempt += 1
                self.failed_reconnects += 1
                # A classified connection fault (the expected case while the server is
                # away) is one WARNING line without a traceback; anything else keeps it.
                fault = "timeout" if isinstance(exc, TimeoutError) else classify(exc)
                _log.warning(
                    "wake listener reconnect %d failed%s",
                    attempt,
                    "" if fault is None else f": {fault}",
                    exc_info=fault is None,
                )
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
