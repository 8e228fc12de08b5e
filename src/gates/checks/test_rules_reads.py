"""Spec rules of the public reads, over a real uvicorn server against PostgreSQL:

* ``rule.transcript.seed_omitted``: a materialized run is executed by the real run
  worker; the session's public transcript holds every session event except the
  scheduler's seed (the instruction), keeps the completed assistant answer, and never
  shows the instruction text, which the authorized point read still returns whole.
* ``rule.http.list_filters``: ``GET /v1/schedules?state=...`` paged with a small limit
  returns exactly the caller's schedules in the supplied states, every page but the
  last full, none twice, none of another principal's; omission lists every state. The
  cursor is stable across ties: schedules sharing one ``updated_at`` are each listed
  once at every page size. Every state of the closed enum is a filter (a COMPLETED
  one-time schedule listed under COMPLETED alone; all four at once list every
  schedule), a value outside it is the 422
  ``schedule.http.invalid_request``; a cursor the server did not issue (garbage,
  truncated, another route's, or the issued one with any of its parts replaced, the
  instant by one at the edge of the calendar) is never a 5xx: on both list routes it
  is served or refused as the 422 ``schedule.page.invalid_cursor``.

Tests of the test: ``scheduling-gates mutate`` (``transcript.seed_included``,
``transcript.answer_dropped``, ``list_filters.applied_after_limit``,
``list_filters.ignored``, ``list_filters.cursor_skips_ties``,
``envelope.invalid_cursor_500``, ``models.state_filter_lacks_completed``,
``routes.state_filter_three``, ``paging.cursor_instant_unchecked``).
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime, timedelta
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


# ------------------------------------------------------------------ closed enum, cursors

ENUM = ("ACTIVE", "PAUSED", "COMPLETED", "CANCELLED")
"""The closed schedule-state enum (spec "State transitions")."""
ODD_PARTS = (
    "0001-01-01T00:00:00+14:00",  # before the first representable UTC instant
    "9999-12-31T23:59:59-14:00",  # after the last
    "2026-03-02T08:00:00",  # no offset
    "not an instant",
    "",
    "\u0000",
)


def edited(cursor: str) -> list[str]:
    """``cursor`` with each of its parts replaced by an odd value, if it is the
    readable base64 JSON array a client may decode and edit (a sealed cursor is not:
    then the garbage and truncated cases stand alone)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return []
    if not isinstance(parts, list):
        return []
    out = []
    for n in range(len(parts)):
        for odd in ODD_PARTS:
            raw = json.dumps([*parts[:n], odd, *parts[n + 1 :]]).encode()
            out.append(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    return out


async def refused_cursor(world: HttpWorld, path: str, cursor: str, *, served: bool) -> int:
    """``cursor`` on ``path``: never a 5xx; a 200 only where ``served`` may be (an edited
    cursor may still name a position), else the 422 invalid_cursor."""
    answer = await world.call("GET", path, params={"cursor": cursor, "limit": 1})
    assert answer.status_code < 500, (path, cursor, answer.status_code, answer.text)
    if served and answer.status_code == 200:
        return 0
    assert answer.status_code == 422, (path, cursor, answer.text)
    assert answer.json()["error"]["code"] == "schedule.page.invalid_cursor", (path, answer.text)
    return 1


async def enum_and_cursors(world: HttpWorld) -> dict[str, int]:
    states: dict[str, str] = {}
    for n, state in enumerate(("ACTIVE", "PAUSED", "CANCELLED")):
        created = await world.create(f"enum-{n}", title=f"enum {n}")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        states[sid] = state
        if state == "PAUSED":
            done = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": 1}
            )
            assert done.status_code == 200, done.text
        elif state == "CANCELLED":
            done = await world.call(
                "DELETE", f"/v1/schedules/{sid}", params={"expected_revision": 1}
            )
            assert done.status_code == 200, done.text
    at = (world.clock.now() + timedelta(minutes=5)).isoformat()
    once = await world.create("enum-once", title="once", cadence={"kind": "ONCE", "at": at})
    assert once.status_code == 201, once.text
    world.clock.advance(600)
    assert (await world.scheduler().worker.run_once()).errors == {}
    states[once.json()["id"]] = "COMPLETED"
    for state in ENUM:
        listed = await world.call("GET", "/v1/schedules", params={"state": state})
        assert listed.status_code == 200, (state, listed.text)
        ids = {item["id"] for item in listed.json()["items"]}
        assert ids == {sid for sid, s in states.items() if s == state}, (state, ids)
    every = await world.call("GET", "/v1/schedules", params={"state": list(ENUM)})
    assert every.status_code == 200, every.text
    assert {item["id"] for item in every.json()["items"]} == set(states), every.text
    for outside in ("completed", "DELETED", "ACTIVE,PAUSED"):
        listed = await world.call("GET", "/v1/schedules", params={"state": outside})
        assert listed.status_code == 422, (outside, listed.text)
        assert listed.json()["error"]["code"] == "schedule.http.invalid_request", outside

    sid = next(iter(states))
    occurrences = f"/v1/schedules/{once.json()['id']}/occurrences"
    first = await world.call("GET", "/v1/schedules", params={"limit": 1})
    cursor = first.json()["next_cursor"]
    assert isinstance(cursor, str), first.text
    refused = 0
    for path in ("/v1/schedules", f"/v1/schedules/{sid}/occurrences"):
        for forged in ("garbage!", "x" * 40, cursor[: len(cursor) // 2]):
            refused += await refused_cursor(world, path, forged, served=False)
    # The schedule list's cursor is not the occurrence inbox's.
    refused += await refused_cursor(world, occurrences, cursor, served=False)
    for forged in edited(cursor):
        refused += await refused_cursor(world, "/v1/schedules", forged, served=True)
    # The inbox's own cursor, edited the same way (two occurrences: one page of one).
    world.clock.advance(86400 * 2)
    daily = await world.call("GET", "/v1/schedules", params={"state": "ACTIVE"})
    active = daily.json()["items"][0]["id"]
    assert (await world.scheduler().worker.run_once()).errors == {}
    inbox = await world.call("GET", f"/v1/schedules/{active}/occurrences", params={"limit": 1})
    inbox_cursor = inbox.json()["next_cursor"]
    if inbox_cursor is not None:
        for forged in edited(inbox_cursor):
            path = f"/v1/schedules/{active}/occurrences"
            refused += await refused_cursor(world, path, forged, served=True)
    return {"states": len(ENUM), "refused_cursors": refused}


@pytest.mark.rule("rule.http.list_filters")
async def test_the_state_enum_is_closed_and_cursors_are_opaque(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        evidence = await enum_and_cursors(world)
    assert evidence["refused_cursors"] >= 7, evidence
