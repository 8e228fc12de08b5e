"""Connection faults met while OPENING a unit of work, and in post-run accounting
(issue 25 findings 1 and 3; ADR 2220), on real PostgreSQL.

The fault is injected at the driver boundary, nowhere else: the product's engine
connects through ``RefusingConnect``, which raises asyncpg's own exception classes
(``CannotConnectNowError`` 57P03 "the database system is starting up",
``TooManyConnectionsError`` 53300 "sorry, too many clients already") for the next
``n`` connects and otherwise opens a real connection, whose class can raise the
driver's own ``InterfaceError`` "another operation is in progress" on its next
statement. Everything else (the unit of work, the retry, the scheduler, the run
worker, the accountant) is the product's, over a real database. The server-side
twins of these faults (a real 57P03 from a server in shutdown, a stopped server)
are in tests/http/test_connection_faults_http.py.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from scheduling.ports.records import RunStatus
from scheduling.ports.retry import RetrySettings
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings as RunWorkerSettings
from scheduling.service.materializer import MaterializeStatus
from scheduling.service.schedule_worker import WorkerSettings
from scheduling.testing import storage_over
from simulation.engine.clock import VirtualClock
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_row, run_worker, seed_tool_agent, submission, submitter
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

REFUSALS = {
    "57P03": lambda: asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    "53300": lambda: asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
}
RUNNER = principal("faults-runner", scopes={"memory.read"})
WIDE = QueueCapacity(8, 1, 1)


class FlakyConnection(asyncpg.Connection):  # type: ignore[misc]
    """A real asyncpg connection whose next statement can raise the driver's own
    "another operation is in progress" (what a backend terminated mid-statement leaves)."""

    gate: RefusingConnect | None = None

    async def prepare(self, *args: Any, **kwargs: Any) -> Any:
        gate = type(self).gate
        query = str(args[0]) if args else ""
        if gate is not None and gate.busy > 0 and gate.busy_match in query:
            gate.busy -= 1
            gate.raised += 1
            raise asyncpg.InterfaceError(
                "cannot perform operation: another operation is in progress"
            )
        return await super().prepare(*args, **kwargs)


class RefusingConnect:
    """The engine's ``async_creator``: refuses the next ``n`` connects with ``kind``'s
    asyncpg exception, then connects for real (``FlakyConnection``)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.left = 0
        self.skip = 0
        self.kind = "57P03"
        self.refused = 0
        self.connects = 0
        self.busy = 0
        self.busy_match = ""
        """Only a statement whose text holds this meets the busy error."""
        self.raised = 0

    def refuse(self, n: int, kind: str, *, after: int = 0) -> None:
        """Refuse ``n`` connects after letting ``after`` through."""
        self.left, self.kind, self.skip = n, kind, after

    async def connect(self) -> Any:
        if self.skip > 0:
            self.skip -= 1
        elif self.left > 0:
            self.left -= 1
            self.refused += 1
            raise REFUSALS[self.kind]()
        self.connects += 1
        FlakyConnection.gate = self
        return await asyncpg.connect(self.url, connection_class=FlakyConnection)

    def engine(self) -> AsyncEngine:
        # NullPool: every unit of work connects, so a refusal meets the next open.
        return create_async_engine(
            "postgresql+asyncpg://", async_creator=self.connect, poolclass=NullPool
        )


RETRY = RetrySettings(attempts=4, base_delay_seconds=0.1, max_delay_seconds=2.0)


def _quiet(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records at ERROR or with a traceback: a classified outage writes neither."""
    return [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize("sqlstate", sorted(REFUSALS))
async def test_a_refused_open_is_waited_out_and_sets_nothing_aside(
    pg_url: str, sqlstate: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 1 (scheduler): 8 refused opens (more than the 4 counted retries) while
    the due schedule is materialized; the schedule is decided on time, not set aside
    for the 60 s isolation backoff, and the log holds WARNING lines, no traceback."""
    h = await MaterializeWorld.open(pg_url)
    gate = RefusingConnect(pg_url)
    engine = gate.engine()
    storage = storage_over(engine)
    try:
        sid = await h.create(misfire_grace_seconds=60)
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        role = h.scheduler_role(
            storage=storage,
            expect_errors=True,
            worker_settings=WorkerSettings(failure_backoff_seconds=60, transient_retry=RETRY),
        )
        gate.refuse(8, sqlstate)
        with caplog.at_level(logging.WARNING):
            report = await role.worker.run_once()
        assert gate.refused == 8, "the refusals did not land"
        assert report.errors == {}, report.errors
        assert report.unavailable == {}
        assert report.count(MaterializeStatus.DECIDED) == 1
        occurrences = (await h.ledger()).of(sid).occurrences
        assert [o["disposition"] for o in occurrences] == ["MATERIALIZED"]
        assert _quiet(caplog) == []
        faults = {getattr(r, "fault", None) for r in caplog.records if r.levelno == logging.WARNING}
        assert faults & {"cannot_connect_now", "too_many_clients"}
    finally:
        await storage.close()
        await engine.dispose()
        await h.close()


async def test_an_outage_longer_than_the_budget_sets_nothing_aside(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Past ``outage_seconds`` the pass ends without setting the schedule aside: the
    next pass, once the server serves, decides it."""
    h = await MaterializeWorld.open(pg_url)
    gate = RefusingConnect(pg_url)
    engine = gate.engine()
    storage = storage_over(engine)
    try:
        sid = await h.create(misfire_grace_seconds=600)
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        short = RetrySettings(attempts=4, base_delay_seconds=0.1, outage_seconds=3.0)
        role = h.scheduler_role(
            storage=storage,
            expect_errors=True,
            worker_settings=WorkerSettings(failure_backoff_seconds=60, transient_retry=short),
        )
        gate.refuse(10_000, "57P03", after=1)  # the scan opens; the materialization cannot
        with caplog.at_level(logging.WARNING):
            first = await role.worker.run_once()
        assert gate.refused >= 3
        assert first.errors == {}
        assert first.unavailable == {sid: "cannot_connect_now"}
        gate.refuse(0, "57P03")
        second = await role.worker.run_once()
        assert second.deferred == [], "the outage set the schedule aside"
        assert second.count(MaterializeStatus.DECIDED) == 1
        assert _quiet(caplog) == []
    finally:
        await storage.close()
        await engine.dispose()
        await h.close()


# ---------------------------------------------------------------- run worker


class ArmAt:
    """A probe that arms the gate's refusals when ``step`` is reached the ``nth`` time."""

    def __init__(self, gate: RefusingConnect, step: str, n: int, kind: str, nth: int = 1):
        self.gate, self.at, self.n, self.kind, self.nth, self.seen = gate, step, n, kind, nth, 0

    async def step(self, name: str) -> None:
        if name == self.at:
            self.seen += 1
            if self.seen == self.nth:
                self.gate.refuse(self.n, self.kind)


@pytest.mark.parametrize(
    ("script", "step"),
    [
        ("run_long:60", "run.heartbeat"),
        ("steps:3", "run.charged"),
        ("steps:1", "run.finished"),  # the post-run accounting hook opens next
    ],
)
async def test_a_run_worker_waits_out_a_refusing_server_mid_run(
    pg_url: str, script: str, step: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 1 (run worker): the next fenced write after ``step`` (a heartbeat, a
    checkpoint; after the finish, the post-run accounting hook) meets 8 refused opens;
    the run completes under the same lease instead of being abandoned until its 60 s
    lease expires, and the log holds no traceback."""
    gate = RefusingConnect(pg_url)
    engine = gate.engine()
    storage = storage_over(engine)
    try:
        admin = storage.as_role("trusted")
        await seed_durable(admin, [RUNNER])
        await seed_tool_agent(admin, START)
        clock = VirtualClock(START)
        run = await submitter(admin, clock).submit(RUNNER, submission(script))
        probe = ArmAt(gate, step, 8, "57P03")
        settings = RunWorkerSettings(transient_retry=RETRY)
        worker = run_worker(storage, clock, "w1", capacity=WIDE, settings=settings, probe=probe)
        with caplog.at_level(logging.WARNING):
            outcome = await worker.run_once()
        assert gate.refused == 8, "the refusals did not land"
        assert outcome is not None
        assert outcome.status == "COMPLETED", outcome
        assert not outcome.lease_lost
        stored = await run_row(admin, run.id)
        assert stored.status is RunStatus.COMPLETED
        async with admin.begin() as uow:
            events = [e.event_type for e in await uow.sessions.events(run.session_id, None)]
        assert events.count("run.started") == 1
        assert events.count("run.completed") == 1
        assert _quiet(caplog) == []
    finally:
        await storage.close()
        await engine.dispose()


# ---------------------------------------------------------------- accounting


async def _finished_scheduled_runs(h: MaterializeWorld, n: int) -> list[UUID]:
    """``n`` materialized occurrences whose runs are COMPLETED (not yet accounted)."""
    sids = [await h.create(misfire_grace_seconds=600) for _ in range(n)]
    h.clock.advance_to(max([await h.next_fire(s) for s in sids]) + timedelta(seconds=1))
    report = await h.scan()
    assert report.count(MaterializeStatus.DECIDED) == n
    rows = await h.sql(
        "UPDATE runs SET status = 'COMPLETED', finished_at = now(), lease_owner = NULL,"
        " lease_expires_at = NULL RETURNING id"
    )
    return [row["id"] for row in rows]


async def test_accounting_retries_another_operation_in_progress(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 3: the driver's "another operation is in progress" state error in
    post-run accounting is retried (the accounting is idempotent), logged under
    ``scheduling.accounting`` at WARNING, never as "schedule scan failed"."""
    h = await MaterializeWorld.open(pg_url)
    gate = RefusingConnect(pg_url)
    engine = gate.engine()
    storage = storage_over(engine)
    try:
        runs = await _finished_scheduled_runs(h, 3)
        role = h.scheduler_role(
            storage=storage, worker_settings=WorkerSettings(transient_retry=RETRY)
        )
        # Two statements of the sweep that touch process_events (the pending read, an
        # accounting event's insert) meet the driver's state error.
        gate.busy, gate.busy_match = 2, "process_events"
        with caplog.at_level(logging.WARNING):
            accounted = await role.worker.account()
        assert gate.raised == 2, "the fault did not land"
        assert accounted == len(runs)
        events = await h.sql(
            "SELECT count(*) AS n FROM process_events WHERE event_type = 'schedule.run_accounted'"
        )
        assert events[0]["n"] == len(runs)
        assert _quiet(caplog) == []
        assert not [r for r in caplog.records if "schedule scan failed" in r.getMessage()]
    finally:
        await storage.close()
        await engine.dispose()
        await h.close()


async def test_the_loop_logs_accounting_under_its_own_name(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An accounting failure the retries cannot cure is logged by the loop under
    ``scheduling.accounting`` (a WARNING naming the fault), not "schedule scan failed";
    the pass itself is unaffected."""
    h = await MaterializeWorld.open(pg_url)
    gate = RefusingConnect(pg_url)
    engine = gate.engine()
    storage = storage_over(engine)
    try:
        await _finished_scheduled_runs(h, 1)
        no_retry = RetrySettings(attempts=0)
        role = h.scheduler_role(
            storage=storage, worker_settings=WorkerSettings(transient_retry=no_retry)
        )
        gate.busy, gate.busy_match = 1, "process_events"  # accounting's, not the scan's
        passes = 0

        def stop() -> bool:
            nonlocal passes
            passes += 1
            return passes > 2

        with caplog.at_level(logging.WARNING):
            await role.worker.run(stop)
        assert gate.raised == 1
        mine = [r for r in caplog.records if r.name == "scheduling.accounting"]
        assert mine
        assert all(r.levelno == logging.WARNING and not r.exc_info for r in mine)
        assert getattr(mine[0], "fault", None) == "interface"
        assert not [r for r in caplog.records if "schedule scan failed" in r.getMessage()]
    finally:
        await storage.close()
        await engine.dispose()
        await h.close()
