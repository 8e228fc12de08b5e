"""Bounded graceful stop of a run worker (issue 13 item 5), with a real RunWorker on
real PostgreSQL and the system clock.

The first stop signal stops claiming; a held run goes on for at most the drain
timeout, then is checkpointed and its lease released (fenced), so another worker
claims it at once and resumes from the checkpoint. The test of the test shows the old
behaviour - finishing the held run - would keep the worker alive for the run's length.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from scheduling.adapters.postgres.run_queue import PostgresRunQueue
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.adapters.system_clock import SystemClock
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import WorkerSettings
from scheduling.runtime.worker import DRAINED
from simulation.worlds.runtime import (
    run_row,
    run_worker,
    seed_tool_agent,
    submission,
    submitter,
)
from simulation.worlds.service import START, principal, seed_durable

pytestmark = pytest.mark.postgres

WHO = principal("drain-runner", scopes={"memory.read"})
WIDE = QueueCapacity(8, 1, 1)
RUN_SECONDS = 120  # far longer than any wait below: finishing it is never an option


async def _setup(pg_url: str) -> tuple[PostgresUnitOfWorkFactory, Any, UUID, UUID]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=6)
    await seed_durable(admin, [WHO])
    await seed_tool_agent(admin, START)
    clock = SystemClock()
    submit = submitter(admin, clock)  # type: ignore[arg-type]
    held = await submit.submit(WHO, submission(f"run_long:{RUN_SECONDS}"))
    queued = await submit.submit(WHO, submission("succeed"))
    return admin, clock, held.id, queued.id


async def _waiting_checkpoint(admin: PostgresUnitOfWorkFactory, run_id: UUID) -> None:
    """Until the run is inside its charged wait (the long part)."""
    for _ in range(400):
        async with admin.begin() as uow:
            checkpoints = await uow.runs.checkpoints(run_id)
        if checkpoints and checkpoints[-1].state.get("wait_until"):
            return
        await asyncio.sleep(0.025)
    raise AssertionError("the run never reached its wait")


async def _db_now(admin: PostgresUnitOfWorkFactory) -> Any:
    async with admin.engine.connect() as conn:
        return (await conn.execute(text("SELECT clock_timestamp()"))).scalar_one()


async def test_stop_drains_then_releases_the_held_run_for_another_worker(pg_url: str) -> None:
    admin, clock, held, queued = await _setup(pg_url)
    try:
        settings = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, drain_seconds=0.3)
        worker = run_worker(admin, clock, "w1", capacity=WIDE, settings=settings)
        outcomes: list[Any] = []
        original = worker.execute

        async def recording(claimed: Any) -> Any:
            outcomes.append(await original(claimed))
            return outcomes[-1]

        worker.execute = recording  # type: ignore[method-assign]
        stop = asyncio.Event()
        serving = asyncio.ensure_future(worker.serve(1, stop))
        await _waiting_checkpoint(admin, held)
        stop.set()
        # Bounded: it returns after the drain timeout, not after the 120 s run.
        await asyncio.wait_for(serving, timeout=30)
        assert [o.reason_code for o in outcomes] == [DRAINED]
        run = await run_row(admin, held)
        assert run.status is RunStatus.RUNNING
        assert run.fencing_token == 1
        assert run.lease_expires_at <= await _db_now(admin)  # released, not held
        async with admin.begin() as uow:
            last = (await uow.runs.checkpoints(held))[-1]
        assert last.fencing_token == 1
        assert last.state["charged"] is True  # the wait was charged: never charged again
        assert last.state["wait_until"]
        # The first signal stopped claiming: the other run was never touched.
        assert (await run_row(admin, queued)).status is RunStatus.QUEUED
        # Another worker claims the released run at once and resumes at its checkpoint.
        queue = PostgresRunQueue(admin, WIDE)
        claimed = await queue.claim("w2", clock.now(), 60)
        assert claimed is not None
        assert claimed.run.id == held
        assert claimed.recovered
        assert claimed.lease.fencing_token == 2
        assert claimed.checkpoint is not None
        assert claimed.checkpoint.seq == last.seq
    finally:
        await admin.dispose()


async def test_of_the_test_without_a_bounded_drain_stop_waits_for_the_run(pg_url: str) -> None:
    admin, clock, held, _ = await _setup(pg_url)
    try:
        settings = WorkerSettings(lease_seconds=60, heartbeat_seconds=20, drain_seconds=3600)
        worker = run_worker(admin, clock, "w1", capacity=WIDE, settings=settings)
        stop = asyncio.Event()
        serving = asyncio.ensure_future(worker.serve(1, stop))
        await _waiting_checkpoint(admin, held)
        stop.set()
        done, _ = await asyncio.wait({serving}, timeout=1.5)
        assert not done, "the worker stopped without draining"
        assert (await run_row(admin, held)).lease_owner == "w1"
        worker.release()  # clean up: hand the run back now
        await asyncio.wait_for(serving, timeout=30)
        run = await run_row(admin, held)
        assert run.lease_expires_at <= await _db_now(admin)
    finally:
        with contextlib.suppress(Exception):
            await admin.dispose()
