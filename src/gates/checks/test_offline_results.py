"""gate.schedule.offline_results on PostgreSQL: every result is recoverable offline.

With no client connected and no notifier wired (nothing transient exists), one schedule
worker and the real run worker (scripted agent, post-run accounting hook) produce:

* a COMPLETED run (``[script:succeed]``), a FAILED run (``[script:fail]``), a run
  cancelled through ``run.cancel`` while queued, a MISSED occurrence (late beyond its
  grace) and a SKIPPED_OVERLAP occurrence (its previous run still queued).

Later, the client pages through ``ScheduleService.occurrences`` (API role, page size 1,
opaque cursors) and must recover each disposition and, where one exists, the exact
run link and the run's terminal status - equal to the database's ground truth.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.identity import Principal
from scheduling.ports.runtime import QueueCapacity
from scheduling.service.cancellation import RunCancellation
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import run_worker

pytestmark = pytest.mark.postgres

CANCELLER = Principal(WHO.tenant_id, WHO.principal_id, WHO.scopes | {"run.cancel"})
PARIS = "Europe/Paris"


def daily(at: str) -> dict[str, Any]:
    return {"kind": "DAILY", "local_time": at, "timezone": PARIS}


async def read_all(h: MaterializeWorld, sid: UUID) -> list[Any]:
    """The client's offline read: every page, one item at a time."""

    async def fetch(cursor: str | None) -> Any:
        return await h.world.service.occurrences(WHO, sid, limit=1, cursor=cursor)

    items = await read_pages(fetch)
    # One page of the default (maximum) size: the same occurrences, none lost between
    # the one-item pages.
    whole = await h.world.service.occurrences(WHO, sid)
    assert whole.next_cursor is None
    assert [identity(i) for i in items] == [identity(i) for i in whole.items], (
        "paging lost or reordered an occurrence"
    )
    return items


def identity(item: Any) -> Any:
    """An occurrence view's id (``item.occurrence.id``), or a bare item's ``id``."""
    occurrence = getattr(item, "occurrence", item)
    return occurrence.id


async def read_pages(fetch: Callable[[str | None], Awaitable[Any]]) -> list[Any]:
    """Every page from ``fetch`` until no next cursor; refuses a page that repeats an
    item an earlier page held, and a cursor handed out twice (a client following it
    would loop or double-count)."""
    items: list[Any] = []
    seen: set[Any] = set()
    cursors: set[str] = set()
    cursor = None
    while True:
        page = await fetch(cursor)
        for item in page.items:
            key = identity(item)
            assert key not in seen, f"occurrence {key} appears on two pages"
            seen.add(key)
        items += page.items
        if page.next_cursor is None:
            return items
        assert page.next_cursor not in cursors, "a page cursor was handed out twice"
        cursors.add(page.next_cursor)
        cursor = page.next_cursor


@pytest.mark.gate("gate.schedule.offline_results", facet="check")
async def test_every_disposition_recovered_from_paginated_reads(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        ok = await h.create(
            key="ok", instruction="Report. [script:succeed]", cadence=daily("09:00")
        )
        bad = await h.create(key="bad", instruction="Report. [script:fail]", cadence=daily("09:00"))
        cancel = await h.create(key="cancel", cadence=daily("09:00"))
        late = await h.create(key="late", cadence=daily("08:50"), misfire_grace_seconds=60)
        nine = await h.next_fire(ok)
        h.clock.advance_to(nine + timedelta(seconds=1))
        scheduler = h.worker(h.materializer())
        assert (await h.scan(scheduler)).errors == {}
        cancel_run = (await h.ledger()).of(cancel).runs[0]["id"]
        await RunCancellation(h.api, h.clock).cancel(CANCELLER, cancel_run)
        # The run worker production builds: post-run accounting as each run ends.
        runner = run_worker(h.admin, h.clock, "runner-1", capacity=QueueCapacity(4, 1, 1))
        executed = 0
        while await runner.run_once() is not None:
            executed += 1
        # The overlap schedule is created now and fires at 10:00; its run stays queued
        # (no run worker runs again) across its next instant.
        overlap = await h.create(key="overlap", cadence=daily("10:00"))
        h.clock.advance_to(await h.next_fire(overlap) + timedelta(seconds=1))
        assert (await h.scan(scheduler)).errors == {}
        h.clock.advance_to(await h.next_fire(overlap) + timedelta(seconds=1))
        assert (await h.scan(scheduler)).errors == {}

        # The schedule worker's accounting sweep also covers the run cancelled while
        # queued (no run worker saw it finish).
        swept = await scheduler.account()
        truth = await h.ledger()
        runs = {r["id"]: r for r in truth.runs}
        expected = {
            ok: ("MATERIALIZED", "COMPLETED"),
            bad: ("MATERIALIZED", "FAILED"),
            cancel: ("MATERIALIZED", "CANCELLED"),
            late: ("MISSED", None),
            overlap: ("SKIPPED_OVERLAP", None),
        }
        recovered: dict[str, Any] = {}
        for sid, (disposition, status) in expected.items():
            items = await read_all(h, sid)
            rows = truth.of(sid).occurrences
            assert len(items) == len(rows) >= 1
            by_id = {r["id"]: r for r in rows}
            for view in items:
                occ, row = view.occurrence, by_id[view.occurrence.id]
                assert (occ.disposition.value, occ.run_id, occ.session_id) == (
                    row["disposition"],
                    row["run_id"],
                    row["session_id"],
                )
                if occ.run_id is None:
                    assert view.run is None
                else:
                    assert view.run is not None
                    assert view.run.run_id == occ.run_id
                    assert view.run.status == runs[occ.run_id]["status"]
            # Newest first: the earliest occurrence of the expected disposition.
            first = [v for v in items if v.occurrence.disposition.value == disposition][-1]
            if status is None:
                assert first.run is None
                assert first.occurrence.reason_code
            else:
                assert first.run is not None
                assert first.run.status == status
            recovered[str(sid)] = [
                (v.occurrence.disposition.value, None if v.run is None else v.run.status)
                for v in reversed(items)
            ]
        accounted = [e for e in truth.events if e["event_type"] == "schedule.run_accounted"]
        assert {e["payload"]["run_status"] for e in accounted} == {
            "COMPLETED",
            "FAILED",
            "CANCELLED",
        }
        gate_evidence.record("runs_executed_by_run_worker", executed)
        gate_evidence.record("recovered", recovered)
        gate_evidence.record("accounted_by_sweep", swept)
        gate_evidence.record("page_size", 1)
        gate_evidence.record("notifications", "none wired; no client connected while firing")
    finally:
        await h.close()
