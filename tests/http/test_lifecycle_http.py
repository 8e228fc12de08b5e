"""The whole schedule lifecycle over HTTP against a running stack: a uvicorn server
over the control plane, and the schedule and run workers built through bootstrap on
the same PostgreSQL database and clock.

create -> list (state filter, cursor) -> read -> patch -> pause -> resume -> a firing
that the real schedule worker materializes and the run worker completes, read from the
inbox -> cancel (the completed run is untouched)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from simulation.worlds.http import http_world, update_body

pytestmark = pytest.mark.postgres


async def test_lifecycle_over_http(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        ids = []
        for n in range(3):
            made = await world.create(
                f"life-{n}", title=f"Job {n}", instruction=f"Do job {n}. [script:succeed]"
            )
            assert made.status_code == 201, made.text
            ids.append(made.json()["id"])
        sid = ids[0]
        paused_other = await world.call(
            "POST", f"/v1/schedules/{ids[2]}/pause", json={"expected_revision": 1}
        )
        assert paused_other.json()["state"] == "PAUSED"

        # List: state filter, then every page through the opaque cursor.
        active = await world.call("GET", "/v1/schedules", params={"state": ["ACTIVE"]})
        assert {i["id"] for i in active.json()["items"]} == set(ids[:2])
        both = await world.call(
            "GET", "/v1/schedules", params={"state": ["ACTIVE", "PAUSED"], "limit": 1}
        )
        seen, page = [], both.json()
        while True:
            seen += [i["id"] for i in page["items"]]
            if page["next_cursor"] is None:
                break
            page = (
                await world.call(
                    "GET",
                    "/v1/schedules",
                    params={
                        "state": ["ACTIVE", "PAUSED"],
                        "limit": 1,
                        "cursor": page["next_cursor"],
                    },
                )
            ).json()
        assert sorted(seen) == sorted(ids)
        assert len(seen) == 3
        done = await world.call("GET", "/v1/schedules", params={"state": ["CANCELLED"]})
        assert done.json()["items"] == []

        # Read, then the full-definition update (revision 2), pause and resume.
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        assert detail["revision"]["instruction"] == "Do job 0. [script:succeed]"
        patched = await world.call(
            "PATCH",
            f"/v1/schedules/{sid}",
            json=update_body(
                detail,
                title="Job zero",
                cadence={
                    "kind": "WEEKLY",
                    "local_time": "07:30",
                    "weekdays": [2, 4],
                    "timezone": "Europe/Paris",
                },
            ),
        )
        assert patched.status_code == 200, patched.text
        assert (patched.json()["current_revision"], patched.json()["title"]) == (2, "Job zero")
        paused = await world.call(
            "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": 2}
        )
        assert (paused.json()["state"], paused.json()["next_fire_at"]) == ("PAUSED", None)
        assert paused.json()["pause_reason"] == "user"
        world.clock.advance(3 * 86400)  # paused time is never backfilled
        resumed = await world.call(
            "POST", f"/v1/schedules/{sid}/resume", json={"expected_revision": 2}
        )
        assert resumed.json()["state"] == "ACTIVE"
        fire = datetime.fromisoformat(resumed.json()["next_fire_at"])
        assert fire > world.clock.now()

        # The firing: the real schedule worker, then the real run worker.
        scheduler, runner = world.scheduler(), world.run_worker()
        world.clock.advance_to(fire + timedelta(seconds=1))
        assert (await scheduler.worker.run_once()).errors == {}
        while await runner.worker.run_once() is not None:
            pass
        inbox = (await world.call("GET", f"/v1/schedules/{sid}/occurrences")).json()
        assert [i["disposition"] for i in inbox["items"]] == ["MATERIALIZED"]
        occurrence = inbox["items"][0]
        assert occurrence["nominal_fire_at"] == resumed.json()["next_fire_at"]
        assert occurrence["schedule_revision"] == 2
        assert occurrence["run"]["status"] == "COMPLETED"
        run_id = occurrence["run_id"]

        # Cancel: terminal, and the completed run is unchanged.
        now = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        cancelled = await world.call(
            "DELETE", f"/v1/schedules/{sid}", params={"expected_revision": now["current_revision"]}
        )
        assert (cancelled.json()["state"], cancelled.json()["next_fire_at"]) == ("CANCELLED", None)
        run = await world.call("GET", f"/v1/runs/{run_id}")
        assert run.json()["status"] == "COMPLETED"
        history = await world.call("GET", "/v1/schedules", params={"state": ["CANCELLED"]})
        assert [i["id"] for i in history.json()["items"]] == [sid]
