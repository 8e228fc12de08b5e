"""Edges of the HTTP edge's answers, over a real uvicorn server against PostgreSQL:

* ``rule.http.bearer``: the authentication scheme is matched without regard to case
  (RFC 7235): the caller's token under ``bearer`` or ``BEARER`` reads what it reads
  under ``Bearer``, while another scheme is the 401.
* ``rule.http.error_envelope``: the byte limit is a bound, not a cut: a create body of
  exactly the limit is served (201), declared with Content-Length or streamed without
  one; one byte more is the 413 ``schedule.http.body_too_large`` either way.
* ``rule.http.reads_equal_the_ledger``: the fields only some states set: the point
  read's ``pause_reason`` equals the schedules row for a schedule the owner paused and
  for one the failure limit paused, and the inbox row of an occurrence whose session was
  erased carries the row's ``links_erased_at``.

Tests of the test: ``scheduling-gates mutate`` (``auth.scheme_case_sensitive``,
``edge.declared_length_at_limit_refused``, ``edge.streamed_at_limit_refused``,
``encoding.pause_reason_dropped``, ``encoding.links_erased_dropped``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.http.app import MAX_BODY_BYTES
from simulation.worlds.http import HttpWorld, body, http_world

pytestmark = pytest.mark.postgres


def instant(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


@pytest.mark.rule("rule.http.bearer")
async def test_the_bearer_scheme_is_matched_in_any_case(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        made = await world.create("scheme-case")
        assert made.status_code == 201, made.text
        token = world.auth()["Authorization"].split(" ", 1)[1]
        answers: dict[str, Any] = {}
        for scheme in ("Bearer", "bearer", "BEARER", "Basic"):
            got = await world.call(
                "GET", "/v1/schedules", None, headers={"Authorization": f"{scheme} {token}"}
            )
            answers[scheme] = (got.status_code, got.json())
    ids = [item["id"] for item in answers["Bearer"][1]["items"]]
    assert ids == [made.json()["id"]], answers["Bearer"]
    for scheme in ("bearer", "BEARER"):
        assert answers[scheme] == answers["Bearer"], (scheme, answers[scheme])
    assert answers["Basic"][0] == 401, answers["Basic"]
    gate_evidence.record("statuses", {k: v[0] for k, v in answers.items()})


def padded(key: str, size: int) -> bytes:
    """A valid create body of exactly ``size`` bytes (JSON white space after it)."""
    raw = json.dumps(body(title=f"Limit {key}")).encode()
    assert len(raw) < size
    return raw + b" " * (size - len(raw))


async def chunks(raw: bytes) -> AsyncIterator[bytes]:
    step = 4096
    for start in range(0, len(raw), step):
        yield raw[start : start + step]


async def post(world: HttpWorld, key: str, content: Any) -> Any:
    headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
    return await world.call("POST", "/v1/schedules", headers=headers, content=content)


@pytest.mark.rule("rule.http.error_envelope")
async def test_a_body_of_exactly_the_limit_is_served(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        declared = await post(world, "limit-declared", padded("declared", MAX_BODY_BYTES))
        streamed = await post(world, "limit-streamed", chunks(padded("streamed", MAX_BODY_BYTES)))
        over = await post(world, "limit-over", padded("over", MAX_BODY_BYTES + 1))
        over_streamed = await post(
            world, "limit-over-streamed", chunks(padded("over-streamed", MAX_BODY_BYTES + 1))
        )
        titles = sorted(
            r["title"]
            for r in await world.sql("SELECT definition->>'title' AS title FROM schedule_revisions")
        )
    assert declared.request.headers.get("content-length") == str(MAX_BODY_BYTES)
    assert "content-length" not in streamed.request.headers
    assert declared.status_code == 201, declared.text
    assert streamed.status_code == 201, streamed.text
    for refused in (over, over_streamed):
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "schedule.http.body_too_large"
    assert titles == ["Limit declared", "Limit streamed"], titles
    gate_evidence.record("statuses", [declared.status_code, streamed.status_code])


@pytest.mark.rule("rule.http.reads_equal_the_ledger")
async def test_pause_reasons_and_erased_links_read_as_the_rows_hold_them(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        by_owner = await world.create("paused-by-owner", title="Paused by owner")
        by_limit = await world.create(
            "paused-by-limit",
            title="Paused by limit",
            cadence={"kind": "DAILY", "local_time": "08:58", "timezone": "Europe/Paris"},
            misfire_grace_seconds=60,
            max_consecutive_failures=1,
        )
        erased = await world.create("erased-links", title="Erased links")
        for made in (by_owner, by_limit, erased):
            assert made.status_code == 201, made.text
        fire = datetime.fromisoformat(erased.json()["next_fire_at"])
        world.clock.advance_to(fire)
        world.clock.advance(1)
        assert (await world.scheduler().worker.run_once()).errors == {}
        owner_id = by_owner.json()["id"]
        paused = await world.call(
            "POST", f"/v1/schedules/{owner_id}/pause", json={"expected_revision": 1}
        )
        assert paused.status_code == 200, paused.text
        erased_id = erased.json()["id"]
        (occurrence,) = await world.sql(
            "SELECT session_id FROM schedule_occurrences WHERE schedule_id = :s",
            s=UUID(erased_id),
        )
        gone = await world.call("DELETE", f"/v1/sessions/{occurrence['session_id']}")
        assert gone.status_code == 200, gone.text

        problems = []
        reasons = {}
        for made in (by_owner, by_limit):
            sid = made.json()["id"]
            (row,) = await world.sql(
                "SELECT state, pause_reason FROM schedules WHERE id = :i", i=UUID(sid)
            )
            point = (await world.call("GET", f"/v1/schedules/{sid}")).json()
            reasons[made.json()["title"]] = row["pause_reason"]
            for k in ("state", "pause_reason"):
                if point[k] != row[k]:
                    problems.append(f"{made.json()['title']} {k}: {point[k]!r} != {row[k]!r}")
        ledger = await world.sql(
            "SELECT id, links_erased_at, session_id FROM schedule_occurrences"
            " WHERE schedule_id = :s",
            s=UUID(erased_id),
        )
        page = await world.call("GET", f"/v1/schedules/{erased_id}/occurrences")
        assert page.status_code == 200, page.text
        items = page.json()["items"]
    assert sorted(reasons.values()) == ["failure_limit", "user"], reasons
    assert [i["id"] for i in items] == [str(o["id"]) for o in ledger]
    (row,) = ledger
    assert row["links_erased_at"] is not None, row
    assert row["session_id"] is None, row
    (item,) = items
    if instant(item["links_erased_at"]) != row["links_erased_at"]:
        problems.append(f"links_erased_at: {item['links_erased_at']!r} != {row['links_erased_at']}")
    assert problems == []
    gate_evidence.record("pause_reasons", reasons)
