"""Run records the scheduler reads back: what makes a run terminal, and what of a run's
end the run worker's save keeps.

* gate.schedule.no_overlap: "A schedule has an in-flight occurrence when its most recent
  MATERIALIZED occurrence links to a non-terminal run." A CANCELLED run is terminal
  (like COMPLETED and FAILED): once the owner cancels an occurrence's run through the
  existing run-cancel route, the schedule's next instant materializes; it is not
  SKIPPED_OVERLAP behind a run that will never end (mutant
  ``domain.cancelled_run_in_flight``: CANCELLED missing from the terminal statuses).
* rule.accounting.failures: the schedule.run_accounted event of a run that failed
  carries its failure classification, not ``failure: null``. The run here is failed by
  the run worker production builds (a scripted agent failing), so the classification
  must survive the worker's own save of the run's end (mutant
  ``domain.run_save_drops_failure``: ``failure`` missing from the run's mutable fields,
  so the FAILED row keeps no failure and the event records none).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from gates.checks.test_rules_outbox import fire
from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.runtime import QueueCapacity
from simulation.worlds.http import http_world
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_worker

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.no_overlap")
async def test_a_cancelled_run_is_not_in_flight(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        made = await world.create("cancelled-run")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        world.clock.advance_to(
            (await world.sql("SELECT next_fire_at FROM schedules"))[0]["next_fire_at"]
            + timedelta(seconds=1)
        )
        assert (await world.scheduler().worker.run_once()).errors == {}
        (first,) = await world.sql("SELECT run_id FROM schedule_occurrences")
        cancelled = await world.call("POST", f"/v1/runs/{first['run_id']}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == "CANCELLED", cancelled.text
        world.clock.advance(86400)
        assert (await world.scheduler().worker.run_once()).errors == {}
        inbox = await world.call("GET", f"/v1/schedules/{sid}/occurrences")
        assert inbox.status_code == 200, inbox.text
        dispositions = [(o["disposition"], o["reason_code"]) for o in inbox.json()["items"]]
        assert dispositions == [("MATERIALIZED", None), ("MATERIALIZED", None)], dispositions
        runs = await world.sql("SELECT status FROM runs ORDER BY created_at")
        assert [r["status"] for r in runs] == ["CANCELLED", "QUEUED"], runs


@pytest.mark.rule("rule.accounting.failures")
async def test_a_run_the_worker_failed_is_accounted_with_its_failure(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(
            title="Failing",
            key="failing",
            instruction="Do it. [script:fail]",
            max_consecutive_failures=10,
        )
        result = await fire(h, sid)
        assert result.occurrence is not None
        worker = run_worker(h.storage, h.clock, "w-fail", capacity=QueueCapacity(4, 1, 1))
        outcome = await worker.run_once()
        assert outcome is not None
        assert (outcome.run_id, outcome.status) == (str(result.run_id), "FAILED"), outcome
        (row,) = await h.sql("SELECT status, failure FROM runs WHERE id = :i", i=result.run_id)
        assert row["status"] == "FAILED", row
        assert isinstance(row["failure"], dict), row
        assert str(row["failure"].get("reason", "")).startswith("schedule."), row
        (event,) = await h.sql(
            "SELECT payload FROM process_events WHERE event_type = :t"
            " AND payload->>'occurrence_id' = :o",
            t=RUN_ACCOUNTED,
            o=str(result.occurrence.id),
        )
        payload = event["payload"]
        assert payload["run_status"] == "FAILED", payload
        assert payload["failure"] is not None, payload
        assert payload["failure"]["reason"] == row["failure"]["reason"], (payload, row)
    finally:
        await h.close()
