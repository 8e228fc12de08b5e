"""rule.http.request_idempotency over a real uvicorn server against PostgreSQL: the
create request's key, scoped to (tenant, principal), with its request hash.

Three callers share one key text: the owner, another principal of its tenant, and the
owner's principal id in another tenant. The owner creates with the key; the identical
request again replays the same schedule (200, ``replayed``); the same key with a
different body (another title, instruction, cadence or scope set, another bound, reserve,
timeout, grace or failure policy) is a 409
``schedule.idempotency.key_reused`` that changes nothing, also after the first schedule
moved on (paused); the other two callers' first requests with that key each create
their own schedule. A request without the key, or with the key header sent twice, is
refused before anything is written.

Racing (a client retrying a request still in flight): four identical requests with one
fresh key at once make one schedule, one 201 and three replays of it, whichever request
finds the key committed and whichever inserts its schedule and then meets the winner's
key row; two requests with one key and different titles at once make one schedule, one
201 and one 409 that wrote nothing.

Tests of the test: ``scheduling-gates mutate`` (``service.racing_create_commits_both``:
the create that loses the key insert commits its own schedule too;
``idempotency.record_ignores_the_winner``: the key ledger reports the loser's entry as
stored).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import OWNER, HttpWorld, body, http_world
from simulation.worlds.service import LIMITS, TENANT_B, principal

pytestmark = pytest.mark.postgres

RULE = "rule.http.request_idempotency"
KEY = "weekly-report"
COLLEAGUE = principal("idem-colleague", scopes=OWNER.scopes)
NAMESAKE = principal(OWNER.principal_id, TENANT_B, scopes=OWNER.scopes)
CHANGED: dict[str, dict[str, Any]] = {
    "title": {"title": "Another report"},
    "instruction": {"instruction": "Summarize only the projects I lead."},
    "cadence": {"cadence": {"kind": "DAILY", "local_time": "10:00", "timezone": "Europe/Paris"}},
    "scopes": {"requested_scopes": []},
    # Every bound is part of the request too: a retry that changed one is another request.
    "cost bound": {"limits": {**LIMITS.to_json(), "max_cost": "1.5"}},
    "step reserve": {"limits": {**LIMITS.to_json(), "reserve_steps": 1}},
    "timeout": {"run_timeout_seconds": 300},
    "grace": {"misfire_grace_seconds": 600},
    "failure policy": {"max_consecutive_failures": 3},
}


async def rows(world: HttpWorld) -> dict[str, Any]:
    return {
        "counts": await world.counts(),
        "schedules": await world.sql("SELECT * FROM schedules ORDER BY id"),
        "keys": await world.sql("SELECT * FROM schedule_idempotency_keys ORDER BY schedule_id"),
    }


@pytest.mark.rule(RULE)
async def test_one_key_one_request_per_caller(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with http_world(pg_url, (OWNER, COLLEAGUE, NAMESAKE)) as world:
        missing = await world.call("POST", "/v1/schedules", json=body())
        assert missing.status_code == 400, missing.text
        assert missing.json()["error"]["code"] == "schedule.http.idempotency_key_required"
        assert (await world.counts())["schedules"] == 0
        # One request, one key: the header sent twice (the same key, or two) is refused,
        # so which copy names the request is never the server's guess.
        for name, keys in {"twice": (KEY, KEY), "two keys": ("k-one", KEY)}.items():
            sent = [*world.auth().items(), *(("Idempotency-Key", key) for key in keys)]
            doubled = await world.client.post("/v1/schedules", json=body(), headers=sent)
            assert doubled.status_code == 400, (name, doubled.text)
            code = doubled.json()["error"]["code"]
            assert code == "schedule.validation.invalid_idempotency_key", (name, code)
        assert await rows(world) == {"counts": await world.counts(), "schedules": [], "keys": []}

        first = await world.create(KEY)
        assert first.status_code == 201, first.text
        sid = first.json()["id"]
        again = await world.create(KEY)
        assert again.status_code == 200, again.text
        assert again.json()["id"] == sid
        assert again.json()["replayed"] is True
        settled = await rows(world)
        assert settled["counts"]["schedules"] == 1

        refused: dict[str, Any] = {}
        for name, change in CHANGED.items():
            reused = await world.create(KEY, **change)
            assert reused.status_code == 409, (name, reused.text)
            refused[name] = reused.json()["error"]["code"]
            assert refused[name] == "schedule.idempotency.key_reused", name
            assert await rows(world) == settled, name

        paused = await world.call(
            "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": 1}
        )
        assert paused.status_code == 200, paused.text
        after_pause = await rows(world)
        late = await world.create(KEY, **CHANGED["title"])
        assert late.status_code == 409, late.text
        assert await rows(world) == after_pause

        theirs = {}
        for who in (COLLEAGUE, NAMESAKE):
            created = await world.create(KEY, who=who, **CHANGED["title"])
            assert created.status_code == 201, (who, created.text)
            theirs[who.tenant_id + "/" + who.principal_id] = created.json()["id"]
        assert len({sid, *theirs.values()}) == 3
        final = await world.sql("SELECT id, tenant_id, principal_id FROM schedules")
        owners = {(r["tenant_id"], r["principal_id"]) for r in final}
        assert owners == {(p.tenant_id, p.principal_id) for p in (OWNER, COLLEAGUE, NAMESAKE)}
        gate_evidence.record("refused", refused)
        gate_evidence.record("callers", sorted(theirs))


RACES = 3


@pytest.mark.rule(RULE)
async def test_racing_requests_with_one_key(pg_url: str, gate_evidence: GateEvidence) -> None:
    async with http_world(pg_url) as world:
        seen: list[list[int]] = []
        for n in range(RACES):
            before = (await world.counts())["schedules"]
            answers = await asyncio.gather(*(world.create(f"race-{n}") for _ in range(4)))
            codes = sorted(a.status_code for a in answers)
            seen.append(codes)
            assert codes == [200, 200, 200, 201], [a.text for a in answers]
            assert len({a.json()["id"] for a in answers}) == 1, [a.text for a in answers]
            assert all(a.json()["replayed"] for a in answers if a.status_code == 200)
            assert (await world.counts())["schedules"] == before + 1
        for n in range(RACES):
            counted = await world.counts()
            split = await asyncio.gather(
                world.create(f"split-{n}", title="One"), world.create(f"split-{n}", title="Two")
            )
            codes = sorted(a.status_code for a in split)
            seen.append(codes)
            assert codes == [201, 409], [a.text for a in split]
            refused = next(a for a in split if a.status_code == 409)
            assert refused.json()["error"]["code"] == "schedule.idempotency.key_reused"
            after = await world.counts()
            assert after["schedules"] == counted["schedules"] + 1
            assert after["schedule_idempotency_keys"] == counted["schedule_idempotency_keys"] + 1
        gate_evidence.record("racing_status_codes", seen)
