"""rule.http.run_cancel over a real uvicorn server against PostgreSQL, on a run a worker
holds: cancelling a scheduled run that a run worker has claimed (RUNNING, leased to it)
makes it CANCELLED with its lease cleared - no owner, no expiry - and its fencing token
one higher, so the holder is fenced out; the schedule keeps firing (the cancel is the
run's, not the schedule's).

``test_rules_run_cancel`` cancels QUEUED runs, which hold no lease; a cancel that kept
the holder's lease would pass there.

Tests of the test: ``scheduling-gates mutate`` (``svc.run_cancel_keeps_lease``).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from scheduling.bootstrap import build_run_worker
from scheduling.ports.runtime import QueueCapacity
from scheduling.testing import storage_over
from simulation.engine.ids import SeededIds
from simulation.worlds.http import OWNER, http_world
from simulation.worlds.service import world_settings

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.run_cancel")]

LEASE_SECONDS = 30.0


async def test_a_claimed_run_is_cancelled_with_its_lease_cleared(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        created = await world.create("claimed-cancel")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
        world.clock.advance(1)
        assert (await world.scheduler().worker.run_once()).errors == {}
        (run,) = await world.sql("SELECT id FROM runs")
        queue = build_run_worker(
            world_settings(),
            None,
            clock=world.clock,
            ids=SeededIds(0).fork("holder"),
            storage=storage_over(world.admin),
            capacity=QueueCapacity(4, 1, 1),
            owner="holder",
        ).queue
        claimed = await queue.claim("holder", world.clock.now(), LEASE_SECONDS)
        assert claimed is not None
        (held,) = await world.sql(
            "SELECT status, lease_owner, lease_expires_at, fencing_token FROM runs"
        )
        assert held["status"] == "RUNNING", held
        assert held["lease_owner"] == "holder", held
        assert held["lease_expires_at"] is not None, held
        world.clock.advance(2)
        answer = await world.call("POST", f"/v1/runs/{run['id']}/cancel")
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "CANCELLED", answer.text
        (row,) = await world.sql(
            "SELECT status, lease_owner, lease_expires_at, fencing_token, finished_at FROM runs"
        )
        assert row["status"] == "CANCELLED", row
        assert (row["lease_owner"], row["lease_expires_at"]) == (None, None), (
            "the cancel kept the holder's lease",
            row,
        )
        assert row["fencing_token"] == held["fencing_token"] + 1, row
        assert row["finished_at"] == world.clock.now(), row
        events = await world.sql(
            "SELECT payload FROM session_events WHERE event_type = 'run.cancelled'"
        )
        assert [e["payload"] for e in events] == [{"previous_status": "RUNNING"}], events
        detail = await world.call("GET", f"/v1/schedules/{sid}")
        assert detail.json()["state"] == "ACTIVE", detail.text
