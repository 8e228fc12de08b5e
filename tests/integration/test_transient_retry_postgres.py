"""Transient database errors retry promptly; deterministic failures keep the isolation
backoff (issue 13 item 3), on real PostgreSQL with real terminated backends.

One scheduler, a 10 s misfire grace and a 60 s isolation backoff: a backend terminated
in the middle of the materialization transaction must not turn the on-time occurrence
into MISSED. The test of the test runs the same fault with retries disabled and sees
exactly that MISSED."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import ConflictError, UnavailableError, ValidationError
from scheduling.ports.records import RunStatus
from scheduling.ports.repositories import COMMIT_OUTCOME_UNKNOWN, RETRY, UNAVAILABLE
from scheduling.ports.retry import RetrySettings, TransientRetry, is_transient
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings as RunWorkerSettings
from scheduling.service.materializer import STEP_DECIDED, MaterializeStatus
from simulation.engine.clock import VirtualClock
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import (
    run_row,
    run_worker,
    seed_tool_agent,
    submission,
    submitter,
)
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

GRACE = 10
RUNNER = principal("retry-runner", scopes={"memory.read"})
WIDE = QueueCapacity(8, 1, 1)


class TerminateAt:
    """A probe that terminates every other backend of the database that is idle inside
    a transaction (the materializer's, parked at the step) the first time ``step`` is
    reached, and waits until it is gone."""

    def __init__(self, url: str, step: str, times: int = 1) -> None:
        self.url, self.at, self.left, self.terminated = url, step, times, 0

    async def step(self, name: str) -> None:
        if name != self.at or self.left <= 0:
            return
        self.left -= 1
        conn = await asyncpg.connect(self.url)
        try:
            rows = await conn.fetch(
                "SELECT pg_terminate_backend(pid, 5000) AS gone FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND state LIKE 'idle in transaction%'"
            )
        finally:
            await conn.close()
        self.terminated += sum(bool(r["gone"]) for r in rows)


async def _due_schedule(h: MaterializeWorld) -> UUID:
    sid = await h.create(misfire_grace_seconds=GRACE)
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    return sid


def _settings(attempts: int) -> dict[str, Any]:
    return {
        "failure_backoff_seconds": 60,
        "transient_retry": RetrySettings(attempts=attempts, base_delay_seconds=0.2),
    }


async def test_terminated_backend_mid_materialization_is_retried_on_time(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await _due_schedule(h)
        probe = TerminateAt(pg_url, STEP_DECIDED)
        worker = h.worker(h.materializer(probe=probe), **_settings(attempts=4))
        report = await worker.run_once()
        assert probe.terminated == 1, "the fault did not land inside the transaction"
        assert report.errors == {}
        assert report.count(MaterializeStatus.DECIDED) == 1
        assert worker.metrics.transient_retries >= 1
        occurrences = (await h.ledger()).of(sid).occurrences
        assert [o["disposition"] for o in occurrences] == ["MATERIALIZED"]
        lag = worker.metrics.lag_percentiles()
        assert lag is not None
        assert lag["p99"] <= GRACE
    finally:
        await h.close()


async def test_without_retry_the_same_fault_ends_the_pass_and_sets_nothing_aside(
    pg_url: str,
) -> None:
    """Test of the test: the fault is real (without retries the pass cannot decide the
    schedule), and since ADR 2220 a connection fault is nobody's definition: it sets
    nothing aside for the 60 s isolation backoff (which made the on-time occurrence
    MISSED under a 10 s grace); the next pass decides it on time."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await _due_schedule(h)
        probe = TerminateAt(pg_url, STEP_DECIDED)
        worker = h.worker(h.materializer(probe=probe), expect_errors=True, **_settings(attempts=0))
        first = await worker.run_once()
        assert probe.terminated == 1
        assert first.errors == {}
        assert list(first.unavailable) == [sid]
        assert first.count(MaterializeStatus.DECIDED) == 0
        second = await worker.run_once()
        assert second.deferred == []
        assert second.count(MaterializeStatus.DECIDED) == 1
        occurrences = (await h.ledger()).of(sid).occurrences
        assert [o["disposition"] for o in occurrences] == ["MATERIALIZED"]
    finally:
        await h.close()


async def test_a_deterministic_failure_is_not_retried_and_keeps_the_backoff(
    pg_url: str,
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await _due_schedule(h)
        # A new current revision whose stored definition cannot be decoded.
        await h.sql(
            "INSERT INTO schedule_revisions (schedule_id, revision, definition,"
            " created_by_principal_id, created_at) SELECT schedule_id, 2,"
            " jsonb_set(definition, '{cadence}', '{\"kind\": \"HOURLY\"}'::jsonb),"
            " created_by_principal_id, created_at FROM schedule_revisions"
            " WHERE schedule_id = :i AND revision = 1",
            i=sid,
        )
        await h.sql("UPDATE schedules SET current_revision = 2 WHERE id = :i", i=sid)
        materializer = h.materializer()
        calls = 0
        original = materializer.materialize

        async def counted(schedule_id: UUID) -> Any:
            nonlocal calls
            calls += 1
            return await original(schedule_id)

        materializer.materialize = counted  # type: ignore[method-assign]
        worker = h.worker(materializer, expect_errors=True, **_settings(attempts=4))
        report = await worker.run_once()
        assert report.errors == {sid: "ValidationError"}
        assert calls == 1, "a deterministic failure must not be retried"
        assert worker.metrics.transient_retries == 0
        h.clock.advance(59)
        assert (await worker.run_once()).deferred == [sid]
        h.clock.advance(2)
        assert (await worker.run_once()).errors == {sid: "ValidationError"}
    finally:
        await h.close()


def test_transient_classification_and_jitter_are_seeded() -> None:
    assert is_transient(UnavailableError(UNAVAILABLE, "x", {"sqlstate": "57P01"}))
    assert is_transient(UnavailableError(UNAVAILABLE, "x", {"sqlstate": None}))
    assert is_transient(ConflictError(RETRY, "x", {"sqlstate": "40P01"}))
    assert not is_transient(UnavailableError(UNAVAILABLE, "x", {"sqlstate": "42P01"}))
    assert not is_transient(ValidationError("schedule.persistence.constraint_violated", "x"))
    settings = RetrySettings(attempts=5, base_delay_seconds=0.1, max_delay_seconds=0.4)
    first, second = random.Random(7), random.Random(7)
    draws = [settings.delay(n, first) for n in range(5)]
    assert draws == [settings.delay(n, second) for n in range(5)]
    assert all(0 <= d <= 0.4 for d in draws)
    assert settings.worst_case_seconds() == pytest.approx(0.1 + 0.2 + 0.4 + 0.4 + 0.4)
    with pytest.raises(ValidationError):
        RetrySettings(attempts=-1)


async def test_an_unknown_commit_outcome_is_retried_only_when_idempotent() -> None:
    clock = VirtualClock(datetime(2026, 1, 1, tzinfo=UTC))
    calls = 0

    async def lost_ack() -> None:
        nonlocal calls
        calls += 1
        raise UnavailableError(UNAVAILABLE, "x", {"sqlstate": None, COMMIT_OUTCOME_UNKNOWN: True})

    retry = TransientRetry(RetrySettings(attempts=3), clock, random.Random(1))
    with pytest.raises(UnavailableError):
        await retry.run(lost_ack, what="fenced write")
    assert calls == 1
    with pytest.raises(UnavailableError):
        await retry.run(lost_ack, what="materialize", idempotent=True)
    assert calls == 1 + 4
    assert clock.now() > clock.start  # the delays were slept on the Clock


# ---------------------------------------------------------------- run worker


class TerminateIdleAt:
    """Terminates every other idle backend of the database (the worker's pooled
    connections) when ``step`` is reached for the ``nth`` time."""

    def __init__(self, url: str, step: str, nth: int = 1) -> None:
        self.url, self.at, self.nth, self.seen, self.terminated = url, step, nth, 0, 0

    async def step(self, name: str) -> None:
        if name != self.at:
            return
        self.seen += 1
        if self.seen != self.nth:
            return
        conn = await asyncpg.connect(self.url)
        try:
            rows = await conn.fetch(
                "SELECT pg_terminate_backend(pid, 5000) AS gone FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'"
            )
        finally:
            await conn.close()
        self.terminated += sum(bool(r["gone"]) for r in rows)


async def _run_env(pg_url: str) -> tuple[PostgresUnitOfWorkFactory, VirtualClock, Any]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=3)
    await seed_durable(admin, [RUNNER])
    await seed_tool_agent(admin, START)
    clock = VirtualClock(START)
    run = await submitter(admin, clock).submit(RUNNER, submission("steps:3"))
    return admin, clock, run


async def test_a_run_worker_survives_terminated_pooled_connections(pg_url: str) -> None:
    admin, clock, run = await _run_env(pg_url)
    try:
        probe = TerminateIdleAt(pg_url, "run.charged", nth=2)
        settings = RunWorkerSettings(transient_retry=RetrySettings(attempts=4))
        worker = run_worker(admin, clock, "w1", capacity=WIDE, settings=settings, probe=probe)
        outcome = await worker.run_once()
        assert probe.terminated >= 1, "the fault did not land"
        assert outcome is not None
        assert outcome.status == "COMPLETED"
        assert not outcome.lease_lost
        # The dead pooled connections are replaced when a unit of work opens (its BEGIN
        # fails before anything was sent, ADR 2220), without a retry of the write.
        stored = await run_row(admin, run.id)
        assert stored.status is RunStatus.COMPLETED
        assert stored.lease_owner is None
        # Nothing written twice: one event per step, checkpoints gap-free.
        async with admin.begin() as uow:
            events = [e.event_type for e in await uow.sessions.events(run.session_id, None)]
        assert events.count("run.started") == 1
        assert events.count("run.completed") == 1
        # The pool holds no connection that saw the failure: a fresh transaction works.
        assert (await run_row(admin, run.id)).status is RunStatus.COMPLETED
    finally:
        await admin.dispose()


async def test_without_retry_a_dead_pooled_connection_is_replaced_at_open(
    pg_url: str,
) -> None:
    """The same fault without the transient retry: the run still completes, because a
    unit of work whose BEGIN meets a dead pooled connection opens a fresh one, once
    (ADR 2220; before it, this left the run RUNNING under the worker's lease)."""
    admin, clock, run = await _run_env(pg_url)
    try:
        probe = TerminateIdleAt(pg_url, "run.charged", nth=2)
        settings = RunWorkerSettings(transient_retry=RetrySettings(attempts=0))
        worker = run_worker(admin, clock, "w1", capacity=WIDE, settings=settings, probe=probe)
        outcome = await worker.run_once()
        assert probe.terminated >= 1, "the fault did not land"
        assert outcome is not None
        assert outcome.status == "COMPLETED"
        assert worker.retry.retried == 0
        stored = await run_row(admin, run.id)
        assert stored.status is RunStatus.COMPLETED
    finally:
        await admin.dispose()
