"""The schedule API's core guards over a real uvicorn server against PostgreSQL: the
Idempotency-Key's exact bounds, the revision guard of every mutation, the create replay's
answer, and definition refusals the other validation checks do not reach.

* ``rule.http.request_idempotency`` (and ``rule.http.update_replay`` for the update's
  optional key): the create and the full-definition update accept a key of 1 to 200
  printable ASCII characters, ``!`` and ``~`` included (what the OpenAPI pattern
  ``^[!-~]{1,200}$`` declares), and refuse 201 characters or an inner space or tab,
  writing nothing. A create replayed after the schedule moved to revision 2 answers the
  schedule as its point read shows it: the current revision's title with the current
  revision number, never revision 1's title beside revision 2's number.
* ``gate.schedule.lifecycle_linear``: ``expected_revision`` must equal the current
  revision: one above it is as stale as one below, on the update, pause, resume and
  cancel, each a 409 ``schedule.lifecycle.stale_revision`` naming the current revision
  that changes no row; a stale pause of an already paused schedule, or a stale cancel
  of a cancelled one, is that 409 too, never the idempotent no-op's 200; a paused
  schedule's full update writes the next revision and stays PAUSED (user) with no next
  firing; and a cancelled schedule stays terminal: its full update, resume and pause
  with the current revision are 409 ``schedule.lifecycle.illegal_transition`` writing
  nothing.
* ``rule.http.error_envelope``: another principal's schedule, another tenant's and an
  absent one answer all six schedule routes that name one with the point read's
  byte-identical 404 ``schedule.not_found`` envelope, details empty.
* ``rule.http.definition_validation``: a policy profile that differs from the pinned
  agent's is refused also when the version is left to the agent's active one; a
  full-definition update carrying ``created_by_principal_id`` (a field of the point read,
  not of the request) is ``schedule.http.invalid_request``; and a paused schedule's
  update to a one-time instant already past is ``schedule.validation.no_future_occurrence``
  (the update is refused on validation, not only when the schedule would fire).

Tests of the test: ``scheduling-gates mutate`` with the ``httpcore.*`` mutants.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from simulation.worlds.http import OWNER, HttpWorld, http_world, update_body
from simulation.worlds.service import TENANT_B, principal

pytestmark = pytest.mark.postgres

STALE = "schedule.lifecycle.stale_revision"
ILLEGAL = "schedule.lifecycle.illegal_transition"
INVALID_KEY = {"schedule.validation.invalid_idempotency_key", "schedule.http.invalid_request"}


async def ledger(world: HttpWorld) -> dict[str, Any]:
    """Every row a schedule write may touch."""
    return {
        "counts": await world.counts(),
        "schedules": await world.sql("SELECT * FROM schedules ORDER BY id"),
        "revisions": await world.sql(
            "SELECT schedule_id, revision FROM schedule_revisions ORDER BY 1, 2"
        ),
        "keys": await world.sql("SELECT key FROM schedule_idempotency_keys ORDER BY key"),
    }


async def point_read(world: HttpWorld, sid: str) -> dict[str, Any]:
    answer = await world.call("GET", f"/v1/schedules/{sid}")
    assert answer.status_code == 200, answer.text
    detail: dict[str, Any] = answer.json()
    return detail


# ------------------------------------------------------------------ the key's bounds

ACCEPTED_KEYS = {
    "one character": "!",
    "200 characters": "~" + "k" * 198 + "!",
    "the printable range's ends": "!~" * 100,
}
REFUSED_KEYS = {
    "201 characters": "k" * 201,
    "an inner space": "weekly report",
    "an inner tab": "weekly\treport",
}


@pytest.mark.rule("rule.http.request_idempotency")
async def test_the_idempotency_key_bounds_are_exact(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        document = (await world.client.get("/openapi.json")).json()
        (header,) = [
            p
            for p in document["paths"]["/v1/schedules"]["post"]["parameters"]
            if p["name"] == "Idempotency-Key"
        ]
        assert header["schema"]["pattern"] == "^[!-~]{1,200}$", header
        created: dict[str, str] = {}
        for name, key in ACCEPTED_KEYS.items():
            made = await world.create(key, title=f"key {name}")
            assert made.status_code == 201, (name, made.text)
            created[name] = made.json()["id"]
            again = await world.create(key, title=f"key {name}")
            assert again.status_code == 200, (name, again.text)
            assert again.json()["id"] == created[name], name
        settled = await ledger(world)
        for name, key in REFUSED_KEYS.items():
            refused = await world.create(key, title=f"key {name}")
            assert refused.status_code in (400, 422), (name, refused.text)
            assert refused.json()["error"]["code"] in INVALID_KEY, (name, refused.text)
            assert await ledger(world) == settled, name
    gate_evidence.record("accepted_keys", sorted(ACCEPTED_KEYS))
    gate_evidence.record("refused_keys", sorted(REFUSED_KEYS))


@pytest.mark.rule("rule.http.update_replay")
async def test_the_update_key_bounds_are_exact(pg_url: str, gate_evidence: GateEvidence) -> None:
    """The full-definition update's optional key follows the create's rule: refused
    with no row changed when too long or not printable ASCII, served at 200 characters."""
    async with http_world(pg_url) as world:
        made = await world.create("update-key-bounds")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        detail = await point_read(world, sid)
        settled = await ledger(world)
        for name, key in REFUSED_KEYS.items():
            refused = await world.call(
                "PATCH",
                f"/v1/schedules/{sid}",
                json=update_body(detail, title=f"update {name}"),
                headers={"Idempotency-Key": key},
            )
            assert refused.status_code in (400, 422), (name, refused.text)
            assert refused.json()["error"]["code"] in INVALID_KEY, (name, refused.text)
            assert await ledger(world) == settled, name
        longest = "~" + "u" * 198 + "!"
        updated = await world.call(
            "PATCH",
            f"/v1/schedules/{sid}",
            json=update_body(detail, title="updated under the longest key"),
            headers={"Idempotency-Key": longest},
        )
        assert updated.status_code == 200, updated.text
        assert updated.json()["current_revision"] == 2, updated.text
    gate_evidence.record("refused_update_keys", sorted(REFUSED_KEYS))


MIRRORED = (
    "id",
    "state",
    "pause_reason",
    "current_revision",
    "next_fire_at",
    "consecutive_failures",
    "title",
    "cadence",
    "timezone",
    "created_at",
    "updated_at",
)


@pytest.mark.rule("rule.http.request_idempotency")
async def test_a_create_replay_answers_the_current_schedule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        first = await world.create("replay-after-update", title="First title")
        assert first.status_code == 201, first.text
        sid = first.json()["id"]
        detail = await point_read(world, sid)
        world.clock.advance(60)
        updated = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, title="Second title")
        )
        assert updated.status_code == 200, updated.text
        current = await point_read(world, sid)
        assert (current["current_revision"], current["title"]) == (2, "Second title"), current
        settled = await ledger(world)
        replay = await world.create("replay-after-update", title="First title")
        assert replay.status_code == 200, replay.text
        answer = replay.json()
        assert answer["replayed"] is True, answer
        assert {k: answer[k] for k in MIRRORED} == {k: current[k] for k in MIRRORED}, answer
        assert await ledger(world) == settled
    gate_evidence.record("replayed", {k: answer[k] for k in ("current_revision", "title")})


# ------------------------------------------------------------------ the revision guard


async def stale(world: HttpWorld, method: str, path: str, current: int, **kwargs: Any) -> None:
    """``method path`` is the 409 stale revision naming ``current`` and changes nothing."""
    before = await ledger(world)
    answer = await world.call(method, path, **kwargs)
    assert answer.status_code == 409, (method, path, answer.text)
    error = answer.json()["error"]
    assert error["code"] == STALE, (method, path, error)
    assert error["details"].get("current_revision") == current, (method, path, error)
    assert await ledger(world) == before, (method, path)


@pytest.mark.gate("gate.schedule.lifecycle_linear")
async def test_expected_revision_must_equal_the_current_one(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        made = await world.create("guard-ahead", title="Guarded")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        path = f"/v1/schedules/{sid}"
        detail = await point_read(world, sid)
        # One revision ahead of the schedule is not its revision.
        ahead = update_body(detail, title="Ahead", expected_revision=2)
        await stale(world, "PATCH", path, 1, json=ahead)
        await stale(world, "POST", f"{path}/pause", 1, json={"expected_revision": 2})
        await stale(world, "DELETE", path, 1, params={"expected_revision": 2})
        moved = await world.call("PATCH", path, json=update_body(detail, title="Two"))
        assert moved.status_code == 200, moved.text
        await stale(world, "PATCH", path, 2, json=update_body(detail, title="Behind"))
        await stale(world, "POST", f"{path}/pause", 2, json={"expected_revision": 3})
        paused = await world.call("POST", f"{path}/pause", json={"expected_revision": 2})
        assert paused.status_code == 200, paused.text
        # A stale retry of a pause the schedule already reached is no success either.
        await stale(world, "POST", f"{path}/pause", 2, json={"expected_revision": 1})
        await stale(world, "POST", f"{path}/resume", 2, json={"expected_revision": 3})
        await stale(world, "POST", f"{path}/resume", 2, json={"expected_revision": 1})
        # A paused schedule's edit writes revision 3 and stays paused, with no firing.
        edit = update_body(detail, title="Paused edit", expected_revision=2)
        edited = await world.call("PATCH", path, json=edit)
        assert edited.status_code == 200, edited.text
        shown = await point_read(world, sid)
        assert (shown["state"], shown["pause_reason"], shown["next_fire_at"]) == (
            "PAUSED",
            "user",
            None,
        ), shown
        assert (shown["current_revision"], shown["title"]) == (3, "Paused edit"), shown
        cancelled = await world.call("DELETE", path, params={"expected_revision": 3})
        assert cancelled.status_code == 200, cancelled.text
        await stale(world, "DELETE", path, 3, params={"expected_revision": 2})
        await stale(world, "DELETE", path, 3, params={"expected_revision": 4})
        # Terminal stays terminal: the current revision writes nothing on a cancelled one.
        settled = await ledger(world)
        for method, url, kwargs in (
            ("PATCH", path, {"json": update_body(detail, title="Reopened", expected_revision=3)}),
            ("POST", f"{path}/resume", {"json": {"expected_revision": 3}}),
            ("POST", f"{path}/pause", {"json": {"expected_revision": 3}}),
        ):
            refused = await world.call(method, url, **kwargs)
            assert refused.status_code == 409, (method, url, refused.text)
            error = refused.json()["error"]
            assert error["code"] == ILLEGAL, (method, url, error)
            assert await ledger(world) == settled, (method, url)
        final = await point_read(world, sid)
        assert (final["state"], final["current_revision"]) == ("CANCELLED", 3), final
    gate_evidence.record("stale_guards", 10)


# ------------------------------------------------------------------ definition refusals


@pytest.mark.rule("rule.http.definition_validation")
async def test_refusals_on_the_paths_the_listed_cases_miss(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        settled = await ledger(world)
        # The agent's active version pinned by the server: its policy must still match.
        mismatch = await world.create(
            "policy-active", agent_version=None, policy_profile="another-profile"
        )
        assert mismatch.status_code == 422, mismatch.text
        assert mismatch.json()["error"]["code"] == "schedule.validation.policy_mismatch"
        assert await ledger(world) == settled
        made = await world.create("refusals", title="Refusals")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        path = f"/v1/schedules/{sid}"
        detail = await point_read(world, sid)
        settled = await ledger(world)
        # A field of the point read is not a field of the request.
        echoed = update_body(detail, created_by_principal_id="someone-else")
        answer = await world.call("PATCH", path, json=echoed)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "schedule.http.invalid_request"
        assert await ledger(world) == settled
        # A paused schedule's update is validated as an active one's: a one-time
        # instant already past has no future occurrence.
        paused = await world.call("POST", f"{path}/pause", json={"expected_revision": 1})
        assert paused.status_code == 200, paused.text
        settled = await ledger(world)
        past = {"kind": "ONCE", "at": format_instant(world.clock.now() - timedelta(hours=1))}
        answer = await world.call("PATCH", path, json=update_body(detail, cadence=past))
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "schedule.validation.no_future_occurrence"
        assert await ledger(world) == settled
    gate_evidence.record("refusals", ["policy_active", "created_by", "paused_past_once"])


# ------------------------------------------------------------------ uniform not-found

COLLEAGUE = principal("httpcore-colleague", scopes=OWNER.scopes)
NAMESAKE = principal(OWNER.principal_id, TENANT_B, scopes=OWNER.scopes)
NOT_FOUND = {
    "error": {
        "code": "schedule.not_found",
        "message": "schedule not found",
        "details": {},
    }
}


@pytest.mark.rule("rule.http.error_envelope")
async def test_every_schedule_route_answers_one_not_found(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """Another principal's schedule, another tenant's under the owner's principal id, and
    no schedule at all answer every schedule route with the one byte-identical 404
    ``schedule.not_found`` envelope of the point read (no details, no row id), and
    change nothing."""
    async with http_world(pg_url, (OWNER, COLLEAGUE, NAMESAKE)) as world:
        mine = await world.create("not-found-own")
        assert mine.status_code == 201, mine.text
        detail = await point_read(world, mine.json()["id"])
        foreign = {"absent": str(uuid.UUID(int=7))}
        for name, who in (("colleague", COLLEAGUE), ("namesake", NAMESAKE)):
            made = await world.create("not-found-foreign", who)
            assert made.status_code == 201, (name, made.text)
            foreign[name] = made.json()["id"]
        settled = await ledger(world)
        answers: dict[str, Any] = {}
        for name, sid in foreign.items():
            path = f"/v1/schedules/{sid}"
            calls: dict[str, tuple[str, str, dict[str, Any]]] = {
                "get": ("GET", path, {}),
                "occurrences": ("GET", f"{path}/occurrences", {}),
                "update": ("PATCH", path, {"json": update_body(detail, title="Taken")}),
                "pause": ("POST", f"{path}/pause", {"json": {"expected_revision": 1}}),
                "resume": ("POST", f"{path}/resume", {"json": {"expected_revision": 1}}),
                "cancel": ("DELETE", path, {"params": {"expected_revision": 1}}),
            }
            for route, (method, url, kwargs) in calls.items():
                answer = await world.call(method, url, **kwargs)
                answers[f"{name} {route}"] = (answer.status_code, answer.json())
        wrong = {k: v for k, v in answers.items() if v != (404, NOT_FOUND)}
        assert wrong == {}, wrong
        assert await ledger(world) == settled
    gate_evidence.record("not_found_answers", len(answers))
