"""The durable lane of materialize_atomic: crash the PostgreSQL server itself after
every write of one materialization, recover, and read what survived.

On a private cluster with fsync, synchronous_commit and full_page_writes on, for each
probe step of the materialization transaction: a fresh database, one due schedule, a
real schedule worker (the least-privilege scheduler role); at the step the probe
SIGKILLs the postmaster (no shutdown checkpoint: crash recovery replays the WAL), the
server restarts on the same port, and what survived is read through a new
connection. Before COMMIT nothing may survive and the schedule must still be due;
after COMMIT the occurrence, session, run, seed checkpoint and events must all be
there. Then the same worker object (its pool reconnects; the transient retry absorbs
the dead connections) runs again and must leave exactly one complete occurrence.

``split_commit=True`` is the test of the test: a materializer whose transaction is
committed right after the run row is inserted (occurrence, session and run in their
own transaction), the plausible mistake the lane must catch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy import text

from scheduling.adapters.postgres.uow import PostgresUnitOfWork
from scheduling.ports.materialization import MaterializationStore, QueuedRun
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.service import materializer as m
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.retry import RetrySettings
from simulation.provider._private import PrivateCluster
from simulation.worlds.materialize import WRITTEN_TABLES, Harness

# Every probe step of the transaction, in order, from the materializer itself (so a
# step added or merged away there is crashed at here without an edit).
STEPS: tuple[str, ...] = (
    m.STEP_LOCKED,
    m.STEP_ADMISSION,
    *m.WRITE_STEPS,
    m.STEP_COMMITTED,
)
# Enough prompt retries to ride out a restart the check has already completed.
RETRY = RetrySettings(attempts=8, base_delay_seconds=0.05, max_delay_seconds=0.5)


class CrashServerAt:
    """A probe that crashes the server (SIGKILL of the postmaster) and restarts it the
    first time ``step`` is reached."""

    def __init__(self, private: PrivateCluster, step: str) -> None:
        self.private, self.at, self.crashed = private, step, False

    async def step(self, name: str) -> None:
        if name != self.at or self.crashed:
            return
        self.crashed = True
        self.private.crash("kill")
        self.private.restart()


class _SplitCommitStore:
    """Wrong on purpose: commits the transaction right after the run's insert (the
    occurrence, session and run then survive a crash at any later write)."""

    def __init__(self, inner: MaterializationStore, role: str | None) -> None:
        self._inner, self._role = inner, role

    async def create_run(self, uow: UnitOfWork, queued: QueuedRun) -> None:
        await self._inner.create_run(uow, queued)
        assert isinstance(uow, PostgresUnitOfWork)
        conn = uow._conn
        assert conn is not None
        await conn.commit()
        await conn.begin()
        if self._role is not None:
            await uow.tx.execute(text(f"SET LOCAL ROLE {self._role}"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def split(materializer: ScheduleMaterializer, role: str | None) -> None:
    """Make ``materializer`` commit its run before the rest of the transaction."""
    materializer._store = _SplitCommitStore(materializer._store, role)


async def _counts(url: str, schedule_id: Any) -> tuple[dict[str, int], datetime | None]:
    """Row counts of every written table and the schedule's next firing, read through a
    new connection (the pooled ones died with the server)."""
    conn = await asyncpg.connect(url)
    try:
        counts = {
            table: int(await conn.fetchval(f"SELECT count(*) FROM {table}"))  # noqa: S608
            for table in WRITTEN_TABLES
        }
        next_fire = await conn.fetchval(
            "SELECT next_fire_at FROM schedules WHERE id = $1", schedule_id
        )
    finally:
        await conn.close()
    return counts, next_fire


async def crash_before_commit_leaves_nothing(
    private: PrivateCluster, template: str, step: str, *, split_commit: bool = False
) -> list[str]:
    """Crash at ``step`` (before COMMIT) with no retry: nothing may survive recovery,
    and the schedule must still be due."""
    url = private.server.create_database(template=template)
    h = await Harness.open(url)
    try:
        sid = await h.create()
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire + timedelta(seconds=1))
        empty, _ = await _counts(url, sid)
        probe = CrashServerAt(private, step)
        materializer = h.materializer(probe=probe)
        if split_commit:
            split(materializer, h.scheduler.assume_role)
        with contextlib.suppress(Exception):  # the crash breaks the transaction on purpose
            await materializer.materialize(sid)
        if not probe.crashed:
            return [f"{step}: the crash never happened"]
        survived, next_fire = await _counts(url, sid)
        problems = [
            f"{step}: {table} kept {survived[table] - empty[table]} row(s) across the crash"
            for table in WRITTEN_TABLES
            if survived[table] != empty[table]
        ]
        if next_fire != fire:
            problems.append(f"{step}: the schedule is no longer due ({next_fire} != {fire})")
        # The same materializer object reconnects (a worker pass retries the dead
        # pooled connections) and decides the occurrence exactly once.
        await h.worker(materializer, expect_errors=True, transient_retry=RETRY).run_once()
        final, _ = await _counts(url, sid)
        problems += _complete_once(step, empty, final)
        return problems
    finally:
        await h.close()
        private.server.drop_database(url)


async def crash_after_commit_keeps_everything(private: PrivateCluster, template: str) -> list[str]:
    """Crash right after COMMIT: the whole ledger must survive recovery."""
    url = private.server.create_database(template=template)
    h = await Harness.open(url)
    try:
        sid = await h.create()
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire + timedelta(seconds=1))
        empty, _ = await _counts(url, sid)
        probe = CrashServerAt(private, m.STEP_COMMITTED)
        result = await h.materializer(probe=probe).materialize(sid)
        if not probe.crashed:
            return ["the crash after COMMIT never happened"]
        survived, next_fire = await _counts(url, sid)
        problems = []
        for table in WRITTEN_TABLES:
            if survived[table] <= empty[table]:
                problems.append(f"committed rows of {table} were lost in the crash")
        if next_fire == fire:
            problems.append("the committed advance of next_fire_at was lost in the crash")
        if result.run_id is None:
            problems.append(f"the materialization decided no run: {result}")
        # A retry by the same objects finds it decided: still exactly one of everything.
        await h.worker(h.materializer(), expect_errors=True, transient_retry=RETRY).run_once()
        final, _ = await _counts(url, sid)
        problems += _complete_once(m.STEP_COMMITTED, empty, final)
        return problems
    finally:
        await h.close()
        private.server.drop_database(url)


def before_commit_steps() -> Sequence[str]:
    return STEPS[:-1]


def _complete_once(step: str, empty: dict[str, int], final: dict[str, int]) -> list[str]:
    problems = [
        f"{step}: after recovery and retry {table} has {final[table] - empty[table]} new rows,"
        " expected 1"
        for table in ("schedule_occurrences", "sessions", "runs")
        if final[table] - empty[table] != 1
    ]
    problems += [
        f"{step}: after recovery and retry {table} gained nothing"
        for table in ("session_events", "run_checkpoints", "process_events")
        if final[table] <= empty[table]
    ]
    return problems
