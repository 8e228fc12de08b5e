"""gate.schedule.not_early, at sub-second resolution: a one-time instant keeps its
microseconds. Timestamps resolve to the microsecond (PostgreSQL timestamptz), so a
one-time schedule at ``T = ...:00.250000Z`` is due at T and not at the whole second
before it. Created over HTTP with that instant, the stored cadence (the point read's
revision) names T exactly, next_fire_at is T, a scheduler pass one microsecond before T
writes nothing, and the pass at T records the occurrence at nominal instant T. A
canonical instant text that dropped the fraction (mutant
``domain.instant_text_drops_microseconds``) stores ``...:00Z``, so the schedule fires
250 ms before the instant its owner asked for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from simulation.worlds.http import http_world

pytestmark = pytest.mark.postgres

TICK = timedelta(microseconds=1)


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@pytest.mark.gate("gate.schedule.not_early", facet="materializer")
async def test_a_one_time_instant_keeps_its_microseconds(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        at = world.clock.now().replace(microsecond=0) + timedelta(hours=1, microseconds=250_000)
        made = await world.create(
            "fraction", cadence={"kind": "ONCE", "at": at.isoformat()}, misfire_grace_seconds=60
        )
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        assert parse(made.json()["next_fire_at"]) == at, made.text
        detail = await world.call("GET", f"/v1/schedules/{sid}")
        assert detail.status_code == 200, detail.text
        cadence = detail.json()["revision"]["cadence"]
        assert parse(cadence["at"]) == at, cadence
        (row,) = await world.sql("SELECT next_fire_at FROM schedules")
        assert row["next_fire_at"] == at, row
        world.clock.advance_to(at - TICK)
        assert (await world.scheduler().worker.run_once()).errors == {}
        assert await world.sql("SELECT id FROM schedule_occurrences") == []
        world.clock.advance_to(at)
        assert (await world.scheduler().worker.run_once()).errors == {}
        (occurrence,) = await world.sql(
            "SELECT nominal_fire_at, materialized_at, disposition FROM schedule_occurrences"
        )
        assert occurrence["nominal_fire_at"] == at, occurrence
        assert occurrence["materialized_at"] >= at, occurrence
        assert occurrence["disposition"] == "MATERIALIZED", occurrence
