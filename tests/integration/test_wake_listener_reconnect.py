"""The wake listener's LISTEN connection comes back after it drops (issue 13): its
backend terminated on the shared server, or the whole server crashed (SIGKILL of a
private cluster's postmaster, down for a while, restarted). After recovery a NOTIFY
wakes the sleeping schedule worker promptly (its fallback poll is 60 s), and the
reconnection itself wakes it once (notifications sent meanwhile are lost). The test of
the test: a listener that does not reconnect sleeps through that NOTIFY. A notification
that arrives while nobody waits ends the next wait at once (the event is re-armed after
a wait, not before)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import asyncpg
import pytest
from tests.integration.test_schedule_worker_postgres import sleeping_worker, wait_for

from scheduling.adapters.postgres.notify import (
    PostgresNotifier,
    PostgresWakeListener,
    ReconnectSettings,
)
from scheduling.adapters.system_clock import SystemClock
from simulation.provider._private import private_cluster
from simulation.provider.templates import migrated_template
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

PROMPT = 5.0  # seconds: far below the 60 s fallback poll
FAST = ReconnectSettings(base_seconds=0.05, cap_seconds=0.4)


class NoReconnect(PostgresWakeListener):
    """Wrong on purpose: the listener before this change (a dropped LISTEN stays gone)."""

    def _on_lost(self, conn: object) -> None:
        self.lost += 1


async def _terminate_listener(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN %'"
        )
    finally:
        await conn.close()
    assert killed == 1


async def _worker_woken_after(
    url: str,
    listener: PostgresWakeListener,
    fault: Callable[[], Awaitable[None]],
    patience: float = PROMPT,
) -> tuple[bool, bool]:
    """A sleeping worker, the fault, recovery, then a NOTIFY: did the reconnection wake
    it at once (notifications sent meanwhile are lost), and did the NOTIFY?"""
    h = await MaterializeWorld.open(url)
    stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    try:
        worker = await sleeping_worker(h, listener)
        # Listening after the create: its own wake-up (at its commit, ADR 2310) is not
        # the one this test waits for.
        await listener.start()
        task = asyncio.create_task(worker.run(stop))
        assert await wait_for(lambda: worker.passes == 1, PROMPT)
        await fault()
        # A reconnection wakes the worker once (notifications may have been lost).
        reconnected = await wait_for(
            lambda: listener.reconnects == 1 and worker.passes == 2, patience
        )
        settled = worker.passes
        await asyncio.sleep(0.2)
        await PostgresNotifier(url).schedule_changed(h.created[0])
        woken = await wait_for(
            lambda: worker.passes > settled, PROMPT if listener.reconnects else 1
        )
        return reconnected, woken
    finally:
        stop.set()
        await listener.close()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await h.close()


async def test_a_terminated_listen_backend_is_reconnected_and_a_notify_wakes_the_worker(
    pg_url: str,
) -> None:
    listener = PostgresWakeListener(pg_url, clock=SystemClock(), reconnect=FAST)
    reconnected, woken = await _worker_woken_after(
        pg_url, listener, lambda: _terminate_listener(pg_url)
    )
    assert (listener.lost, listener.reconnects) == (1, 1)
    assert reconnected, "the reconnection did not wake the worker (lost notifications)"
    assert woken, "a NOTIFY after the reconnection did not wake the worker"
    assert listener.received == 1


async def test_of_the_test_a_listener_that_does_not_reconnect_sleeps_through_the_notify(
    pg_url: str,
) -> None:
    listener = NoReconnect(pg_url, clock=SystemClock(), reconnect=FAST)
    reconnected, woken = await _worker_woken_after(
        pg_url, listener, lambda: _terminate_listener(pg_url), patience=1
    )
    assert listener.lost == 1
    assert not reconnected
    assert not woken
    assert listener.received == 0


async def test_a_notification_that_arrived_while_nobody_waited_is_kept(pg_url: str) -> None:
    """A NOTIFY delivered while the worker scans (nobody in ``wait``) ends the next
    ``wait`` at once, and only that one: the event is re-armed after it, not before."""
    listener = PostgresWakeListener(pg_url, clock=SystemClock(), reconnect=FAST)
    await listener.start()
    try:
        await PostgresNotifier(pg_url).schedule_changed(UUID(int=7))
        assert await wait_for(lambda: listener.received == 1, PROMPT)
        await asyncio.wait_for(listener.wait(), timeout=1.0)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(listener.wait(), timeout=0.3)
    finally:
        await listener.close()


@pytest.fixture(scope="module")
def crashable() -> Any:
    with private_cluster(durable=True) as private:
        yield private, migrated_template(private.server)


async def test_a_server_crash_is_ridden_out_with_bounded_backoff(crashable: Any) -> None:
    private, template = crashable
    url = private.server.create_database(template=template)
    listener = PostgresWakeListener(url, clock=SystemClock(), reconnect=FAST)

    async def crash_and_stay_down() -> None:
        private.crash("kill")
        # Down long enough for several refused attempts (0.05 s doubling to 0.4 s).
        await asyncio.sleep(0.8)
        await asyncio.to_thread(private.restart)

    try:
        reconnected, woken = await _worker_woken_after(url, listener, crash_and_stay_down)
    finally:
        private.server.drop_database(url)
    assert (listener.lost, listener.reconnects) == (1, 1)
    assert reconnected, "the reconnection did not wake the worker (lost notifications)"
    assert woken, "a NOTIFY after the server's restart did not wake the worker"
    assert listener.received == 1
    assert listener.failed_reconnects > 0, "the server was down: attempts must have failed"
    assert private.crashes == 1
