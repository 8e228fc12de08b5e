"""Spec rules of the public reads, over a real uvicorn server against PostgreSQL:

* ``rule.transcript.seed_omitted``: a materialized run is executed by the real run
  worker; the session's public transcript holds every session event except the
  scheduler's seed (the instruction), keeps the completed assistant answer, and never
  shows the instruction text, which the authorized point read still returns whole.
* ``rule.http.list_filters``: ``GET /v1/schedules?state=...`` paged with a small limit
  returns exactly the caller's schedules in the supplied states, every page but the
  last full, none twice, none of another principal's; omission lists every state. The
  cursor is stable across ties: schedules sharing one ``updated_at`` are each listed
  once at every page size.

Tests of the test: ``scheduling-gates mutate`` (``transcript.seed_included``,
``transcript.answer_dropped``, ``list_filters.applied_after_limit``,
``list_filters.ignored``, ``list_filters.cursor_skips_ties``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from scheduling.runtime.scripted import ANSWER
from simulation.worlds.http import OWNER, HttpWorld, http_world
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

OTHER = principal("reads-other", scopes=OWNER.scopes)
TIED = principal("reads-tied", scopes=OWNER.scopes)
INSTRUCTION = "Summarize the overnight news, marker 51f0c2, for the projects I follow."


# ------------------------------------------------------------------ transcript


async def transcript(world: HttpWorld) -> dict[str, Any]:
    created = await world.create("seeded", title="Seeded", instruction=INSTRUCTION)
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
    world.clock.advance(1)
    assert (await world.scheduler().worker.run_once()).errors == {}
    outcome = await world.run_worker().worker.run_once()
    assert outcome is not None
    assert outcome.status == "COMPLETED", outcome
    links = await world.sql(
        "SELECT session_id FROM schedule_occurrences WHERE schedule_id = :s", s=sid
    )
    session = str(links[0]["session_id"])
    stored = await world.sql(
        "SELECT seq, event_type, actor, payload::text AS payload FROM session_events"
        " WHERE session_id = :s ORDER BY seq",
        s=session,
    )
    seeds = [e for e in stored if INSTRUCTION in e["payload"]]
    assert len(seeds) == 1, "the instruction is not the session's seed event"
    users = [e for e in stored if e["event_type"] == "message.user"]
    assert users[0] is seeds[0], "the seed is not the session's first user event"
    assert seeds[0]["actor"] == "scheduler", seeds
    answers = [e["seq"] for e in stored if e["event_type"] == "message.assistant"]
    assert len(answers) == 1, stored

    read = await world.call("GET", f"/v1/sessions/{session}/transcript")
    assert read.status_code == 200, read.text
    events = read.json()["events"]
    assert INSTRUCTION not in read.text, "the transcript shows the scheduler's seed"
    shown = [e["seq"] for e in events]
    assert shown == [e["seq"] for e in stored if e["seq"] != seeds[0]["seq"]], (shown, stored)
    answer = [e for e in events if e["event_type"] == "message.assistant"]
    assert len(answer) == 1, events
    assert ANSWER in str(answer[0]), answer
    point = await world.call("GET", f"/v1/schedules/{sid}")
    assert point.json()["revision"]["instruction"] == INSTRUCTION
    return {"stored": len(stored), "shown": len(shown)}


@pytest.mark.rule("rule.transcript.seed_omitted")
async def test_the_transcript_omits_the_seed_and_keeps_the_answer(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        evidence = await transcript(world)
    assert evidence["shown"] == evidence["stored"] - 1


# ------------------------------------------------------------------ list filters

STATES = ("ACTIVE", "PAUSED", "CANCELLED")
# The order of the state changes interleaves the states in the list's order (newest
# update first): P C P C P, then the untouched ACTIVE ones.
PLAN = ("ACTIVE", "PAUSED", "CANCELLED", "ACTIVE", "PAUSED", "CANCELLED", "PAUSED")


async def populate(world: HttpWorld, who: Any, prefix: str) -> dict[str, str]:
    """Schedules of ``who`` in the states of ``PLAN``: id -> state."""
    made: dict[str, str] = {}
    for n, state in enumerate(PLAN):
        created = await world.create(f"{prefix}-{n}", who, title=f"{prefix} {n}")
        assert created.status_code == 201, created.text
        made[created.json()["id"]] = state
        world.clock.advance(1)
    for sid, state in made.items():
        if state == "PAUSED":
            done = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", who, json={"expected_revision": 1}
            )
        elif state == "CANCELLED":
            done = await world.call(
                "DELETE", f"/v1/schedules/{sid}", who, params={"expected_revision": 1}
            )
        else:
            continue
        assert done.status_code == 200, done.text
        world.clock.advance(1)
    return made


async def pages(world: HttpWorld, who: Any, states: list[str], limit: int) -> list[list[Any]]:
    out: list[list[Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, "state": states}
        if cursor is not None:
            params["cursor"] = cursor
        page = await world.call("GET", "/v1/schedules", who, params=params)
        assert page.status_code == 200, page.text
        out.append(page.json()["items"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return out
        assert len(out) < 50, "the cursor never ends"


async def filters(world: HttpWorld) -> dict[str, Any]:
    mine = await populate(world, OWNER, "own")
    theirs = await populate(world, OTHER, "other")
    checked = 0
    for states in (["PAUSED"], ["CANCELLED"], ["ACTIVE", "PAUSED"], [], list(STATES)):
        for who, own in ((OWNER, mine), (OTHER, theirs)):
            wanted = {sid for sid, s in own.items() if not states or s in states}
            for limit in (1, 2, 3):
                found = await pages(world, who, states, limit)
                ids = [item["id"] for page in found for item in page]
                assert len(ids) == len(set(ids)), (states, limit, "an item twice")
                assert set(ids) == wanted, (states, limit, ids)
                assert all(len(page) == limit for page in found[:-1]), (states, limit, found)
                assert len(found[-1]) <= limit, (states, limit, "the last page is too long")
                for page in found:
                    for item in page:
                        assert not states or item["state"] in states, (states, item)
                checked += 1
    return {"listings": checked}


async def ties(world: HttpWorld) -> int:
    """Schedules created at one instant share their ``updated_at``: the cursor still
    pages through them once each (a cursor on the timestamp alone skips the rest of a
    tie at every page boundary)."""
    made = set()
    for n in range(5):
        created = await world.create(f"tied-{n}", TIED, title=f"tied {n}")
        assert created.status_code == 201, created.text
        made.add(created.json()["id"])
    for limit in (1, 2, 3):
        found = await pages(world, TIED, [], limit)
        ids = [item["id"] for page in found for item in page]
        assert sorted(ids) == sorted(made), (limit, "a tie was skipped or repeated", ids)
        assert len({item["updated_at"] for page in found for item in page}) == 1
    return len(made)


@pytest.mark.rule("rule.http.list_filters")
async def test_state_filters_apply_before_cursor_and_limit(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, OTHER, TIED]) as world:
        evidence = await filters(world)
        tied = await ties(world)
    assert evidence["listings"] == 5 * 2 * 3
    assert tied == 5


PAGE_BOUND = 100
"""The largest page either list route serves (its OpenAPI ``maximum``)."""


@pytest.mark.rule("rule.http.list_filters")
async def test_both_list_routes_bound_their_limit(pg_url: str) -> None:
    """A limit of 1 to 100 is served; 0, 101 and a huge one are the 422
    ``schedule.http.invalid_request``, on the schedule list and the occurrence inbox,
    and the OpenAPI document declares the same bounds."""
    async with http_world(pg_url) as world:
        created = await world.create("bounded-list")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        document = (await world.client.get("/openapi.json")).json()
        for path in ("/v1/schedules", f"/v1/schedules/{sid}/occurrences"):
            template = path.replace(sid, "{schedule_id}")
            (limit,) = [
                p for p in document["paths"][template]["get"]["parameters"] if p["name"] == "limit"
            ]
            assert (limit["schema"]["minimum"], limit["schema"]["maximum"]) == (1, PAGE_BOUND)
            for served in (1, PAGE_BOUND):
                answer = await world.call("GET", path, params={"limit": served})
                assert answer.status_code == 200, (path, served, answer.text)
            for refused in (0, PAGE_BOUND + 1, 10**6):
                answer = await world.call("GET", path, params={"limit": refused})
                assert answer.status_code == 422, (path, refused, answer.text)
                assert answer.json()["error"]["code"] == "schedule.http.invalid_request"
