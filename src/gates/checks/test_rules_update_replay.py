"""rule.http.update_replay over a real uvicorn server against PostgreSQL: the
full-definition update (``PATCH /v1/schedules/{id}``) with an Idempotency-Key uses the
request ledger the create uses, its hash over the schedule id, the expected revision and
the definition; an update that changes nothing writes nothing but its key.

* Keyed update: revision 2 and one ``schedule.updated`` event; the identical request
  again replays it (``replayed``) and changes no row.
* The same key with another title, bound, reserve, timeout, grace or failure policy, or
  with the same definition under another expected revision, is a 409
  ``schedule.idempotency.key_reused`` that changes no row.
* An update whose definition equals the current revision (with and without a key) is a
  200 that writes no revision, no event and no state; a keyed one records its key, so
  that key with a changed definition afterwards is a 409 as well.
* Racing: three identical keyed updates sent at once (a client retrying a request still
  in flight) write one revision and one event; every answer names that revision, one
  applied and two replays, never a stale-revision 409 for a request that was applied.

Tests of the test: ``scheduling-gates mutate`` (``update.replay_ignores_hash``: a key
replays whatever the body; ``update.hash_ignores_revision``: the expected revision is
not hashed; ``update.unchanged_writes_revision``: an unchanged definition writes
revision N+1 and its event; ``update.racing_key_not_rechecked``: the key is not looked
up again under the row lock, so a racing identical request fails as stale).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import HttpWorld, http_world, update_body

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.update_replay")]

KEY_REUSED = "schedule.idempotency.key_reused"


async def rows(world: HttpWorld) -> dict[str, Any]:
    """Every row an update may write."""
    return {
        "schedules": await world.sql("SELECT * FROM schedules ORDER BY id"),
        "revisions": await world.sql(
            "SELECT schedule_id, revision, definition FROM schedule_revisions"
            " ORDER BY schedule_id, revision"
        ),
        "keys": await world.sql(
            "SELECT key, request_hash, schedule_id FROM schedule_idempotency_keys ORDER BY key"
        ),
        "events": await world.sql("SELECT id, event_type FROM process_events ORDER BY id"),
    }


async def patch(world: HttpWorld, sid: str, payload: dict[str, Any], key: str | None) -> Any:
    headers = {} if key is None else {"Idempotency-Key": key}
    return await world.call("PATCH", f"/v1/schedules/{sid}", json=payload, headers=headers)


def updated_events(settled: dict[str, Any]) -> int:
    return sum(e["event_type"] == "schedule.updated" for e in settled["events"])


async def test_a_keyed_update_applies_once_and_its_key_names_one_request(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        created = await world.create("update-replay-create")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        changed = update_body(detail, title="Evening briefing")

        first = await patch(world, sid, changed, "edit-1")
        assert first.status_code == 200, first.text
        assert first.json()["current_revision"] == 2
        applied = await rows(world)
        assert len(applied["revisions"]) == 2
        assert updated_events(applied) == 1

        again = await patch(world, sid, changed, "edit-1")
        assert again.status_code == 200, again.text
        assert again.json()["replayed"] is True, again.text
        assert again.json()["current_revision"] == 2
        assert await rows(world) == applied, "the identical keyed update applied again"

        refused: dict[str, str] = {}
        limits = changed["limits"]
        reuses = {
            "another title": update_body(detail, title="Night briefing"),
            "another expected revision": {**changed, "expected_revision": 2},
            # Every bound is part of the request's hash too.
            "another cost bound": {**changed, "limits": {**limits, "max_cost": "1.5"}},
            "another step reserve": {**changed, "limits": {**limits, "reserve_steps": 1}},
            "another timeout": {**changed, "run_timeout_seconds": 300},
            "another grace": {**changed, "misfire_grace_seconds": 600},
            "another failure policy": {**changed, "max_consecutive_failures": 3},
        }
        for name, payload in reuses.items():
            reused = await patch(world, sid, payload, "edit-1")
            assert reused.status_code == 409, (name, reused.text)
            refused[name] = reused.json()["error"]["code"]
            assert refused[name] == KEY_REUSED, (name, reused.text)
            assert await rows(world) == applied, f"a reused key ({name}) changed a row"
        gate_evidence.record("refused", refused)


async def test_an_unchanged_update_writes_nothing_but_its_key(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        created = await world.create("update-unchanged-create")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        same = update_body(detail)
        before = await rows(world)

        plain = await patch(world, sid, same, None)
        assert plain.status_code == 200, plain.text
        assert plain.json()["current_revision"] == 1
        assert await rows(world) == before, "an unchanged update wrote a row"

        keyed = await patch(world, sid, same, "same-1")
        assert keyed.status_code == 200, keyed.text
        assert keyed.json()["current_revision"] == 1
        after = await rows(world)
        assert after["schedules"] == before["schedules"], "an unchanged update changed state"
        assert after["revisions"] == before["revisions"], "an unchanged update wrote a revision"
        assert after["events"] == before["events"], "an unchanged update wrote an event"
        assert len(after["keys"]) == len(before["keys"]) + 1, "its key was not recorded"

        reused = await patch(world, sid, update_body(detail, title="Other"), "same-1")
        assert reused.status_code == 409, reused.text
        assert reused.json()["error"]["code"] == KEY_REUSED
        assert await rows(world) == after
        gate_evidence.record("revisions", len(after["revisions"]))


RACES = 3


async def test_racing_identical_keyed_updates_apply_once(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        seen = []
        for n in range(RACES):
            created = await world.create(f"update-race-create-{n}")
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
            payload = update_body(detail, title=f"Raced {n}")
            answers = await asyncio.gather(
                *(patch(world, sid, payload, f"update-race-{n}") for _ in range(3))
            )
            shown = [(a.status_code, a.text[:120]) for a in answers]
            assert all(a.status_code == 200 for a in answers), shown
            assert [a.json()["current_revision"] for a in answers] == [2, 2, 2], shown
            assert sorted(bool(a.json()["replayed"]) for a in answers) == [False, True, True]
            settled = await world.sql(
                "SELECT count(*) AS n FROM schedule_revisions WHERE schedule_id = :s", s=sid
            )
            assert settled[0]["n"] == 2, settled
            events = await world.sql(
                "SELECT count(*) AS n FROM process_events"
                " WHERE schedule_id = :s AND event_type = 'schedule.updated'",
                s=sid,
            )
            assert events[0]["n"] == 1, events
            seen.append([a.status_code for a in answers])
        gate_evidence.record("racing_answers", seen)
