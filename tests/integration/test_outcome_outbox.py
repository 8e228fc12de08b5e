"""The outcome outbox on PostgreSQL: ``schedule_run_finished`` rows commit with the
post-run accounting (through the run's pinned revision) or with the materializer's
skipped/missed decision, carry only the title and nominal instant, appear once per
occurrence, and drain idempotently through the delivery port."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from scheduling.ports.outbox import RUN_FINISHED, OutboxMessage
from scheduling.ports.runtime import QueueCapacity
from scheduling.service.accounting import RunAccountant
from scheduling.service.outbox import OutboxReader
from scheduling.service.values import SchedulePatch
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import run_worker

pytestmark = pytest.mark.postgres
SECRETLESS = "Summarize the overnight news: unique-instruction-marker."


class Recording:
    def __init__(self, fail_first: bool = False) -> None:
        self.delivered: list[OutboxMessage] = []
        self.fail_first = fail_first

    async def deliver(self, message: OutboxMessage) -> None:
        if self.fail_first:
            self.fail_first = False
            raise ConnectionError("channel down")
        self.delivered.append(message)


async def outbox(h: MaterializeWorld) -> list[dict[str, Any]]:
    return await h.sql("SELECT * FROM schedule_outbox ORDER BY created_at, id")


async def test_a_missed_occurrence_writes_its_outcome_with_the_decision(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Briefing", instruction=SECRETLESS)
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire + timedelta(seconds=901))  # past the 900 s grace
        made = await h.materializer().materialize(sid)
        assert made.occurrence is not None
        assert made.occurrence.disposition.value == "MISSED"
        [row] = await outbox(h)
        assert row["kind"] == RUN_FINISHED
        assert row["occurrence_id"] == made.occurrence.id
        assert row["payload"] == {
            "title": "Briefing",
            "nominal_fire_at": fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        assert "unique-instruction-marker" not in str(row)
        assert row["delivered_at"] is None
    finally:
        await h.close()


async def test_an_accounted_run_writes_one_outcome_naming_its_pinned_revision(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Old title", instruction=SECRETLESS)
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire + timedelta(seconds=1))
        made = await h.materializer().materialize(sid)
        assert made.run_id is not None
        assert await outbox(h) == [], "a materialized occurrence waits for its run"
        # Renamed while the run is in flight: the alert keeps the identity at firing.
        await h.world.service.patch(WHO, sid, 1, SchedulePatch(title="New title"), "rename")
        # The run worker accounts the finished run (its post-run hook, as in production).
        worker = run_worker(h.admin, h.clock, "w1", capacity=QueueCapacity(4, 1, 1))
        outcome = await worker.run_once()
        assert outcome is not None
        assert len(await outbox(h)) == 1
        # A second accounting (the scheduler's sweep) finds it accounted: no second row.
        accountant = RunAccountant(uow=h.scheduler, clock=h.clock, ids=h.world.ids.fork("acct"))
        again = await accountant.account_run(made.run_id)
        assert again is not None
        assert again.already_accounted
        [row] = await outbox(h)
        assert row["payload"] == {
            "title": "Old title",
            "nominal_fire_at": fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        assert set(row["payload"]) == {"title", "nominal_fire_at"}
    finally:
        await h.close()


async def test_the_reader_drains_idempotently_and_retries_a_failed_delivery(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ids: list[UUID] = []
        for n in range(3):
            sid = await h.create(key=f"k-{n}", title=f"T{n}")
            ids.append(sid)
        h.clock.advance(2 * 86400 + 1000)  # every latest instant is past its grace
        for sid in ids:
            await h.materializer().materialize(sid)
        assert len(await outbox(h)) == 3
        flaky = Recording(fail_first=True)
        reader = OutboxReader(uow=h.scheduler, delivery=flaky, clock=h.clock)
        with contextlib.suppress(ConnectionError):
            await reader.drain()
        assert all(r["delivered_at"] is None for r in await outbox(h))
        assert await reader.drain() == 3
        assert await reader.drain() == 0
        assert sorted(m.payload["title"] for m in flaky.delivered) == ["T0", "T1", "T2"]
        assert all(r["delivered_at"] is not None for r in await outbox(h))
    finally:
        await h.close()
