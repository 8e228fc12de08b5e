"""rule.http.update_replay: an update's idempotency key names the schedule it updates.

The request hash of a keyed update covers the schedule id, the expected revision and
the definition (the spec's "canonical hash over its stable ID, expected revision, and
explicit patch"). Two schedules of one caller, created from one body, are both at
revision 1 with equal definitions: the same key sent for the identical update of the
second schedule is another request, a 409 ``schedule.idempotency.key_reused`` that
leaves the second schedule untouched, never a replay answering the first schedule.
Checked over HTTP on the full-definition update and through the schedule service on
the conversational patch, both on PostgreSQL.

Tests of the test: ``scheduling-gates mutate`` (``httpcore.update_hash_ignores_schedule``,
``httpcore.patch_hash_ignores_schedule``).
"""

from __future__ import annotations

from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import ConflictError
from scheduling.service import SchedulePatch
from scheduling.testing import open_storage
from simulation.worlds.http import HttpWorld, http_world, update_body
from simulation.worlds.service import build_world, definition, principal, seed_durable

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.update_replay")]

KEY_REUSED = "schedule.idempotency.key_reused"
OWNER = principal("update-key-owner")


async def state_of(world: HttpWorld, sid: str) -> dict[str, Any]:
    return {
        "schedule": await world.sql("SELECT * FROM schedules WHERE id = :i", i=sid),
        "revisions": await world.sql(
            "SELECT revision FROM schedule_revisions WHERE schedule_id = :i", i=sid
        ),
        "events": await world.sql("SELECT id FROM process_events WHERE schedule_id = :i", i=sid),
    }


async def test_an_update_key_is_bound_to_its_schedule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        first = await world.create("update-key-first")
        second = await world.create("update-key-second")
        assert (first.status_code, second.status_code) == (201, 201), (first.text, second.text)
        a, b = first.json()["id"], second.json()["id"]
        detail_a = (await world.call("GET", f"/v1/schedules/{a}")).json()
        detail_b = (await world.call("GET", f"/v1/schedules/{b}")).json()
        change = update_body(detail_a, title="Renamed")
        assert update_body(detail_b, title="Renamed") == change
        headers = {"Idempotency-Key": "rename-once"}
        applied = await world.call("PATCH", f"/v1/schedules/{a}", json=change, headers=headers)
        assert applied.status_code == 200, applied.text
        assert (applied.json()["id"], applied.json()["current_revision"]) == (a, 2)
        before = await state_of(world, b)
        reused = await world.call("PATCH", f"/v1/schedules/{b}", json=change, headers=headers)
        assert reused.status_code == 409, reused.text
        assert reused.json()["error"]["code"] == KEY_REUSED, reused.text
        assert await state_of(world, b) == before
        again = await world.call("PATCH", f"/v1/schedules/{a}", json=change, headers=headers)
        assert again.status_code == 200, again.text
        assert (again.json()["id"], again.json()["replayed"]) == (a, True), again.text
    gate_evidence.record("other_schedule", KEY_REUSED)


async def test_a_patch_key_is_bound_to_its_schedule(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    storage = open_storage(pg_url, pool_size=2)
    try:
        await seed_durable(storage.factory("trusted"), [OWNER])
        service = build_world(storage).service
        a = (await service.create(OWNER, "patch-key-a", definition())).schedule.id
        b = (await service.create(OWNER, "patch-key-b", definition())).schedule.id
        patch = SchedulePatch(title="Renamed by patch")
        applied = await service.patch(OWNER, a, 1, patch, "patch-once")
        assert (applied.schedule.id, applied.schedule.current_revision) == (a, 2)
        with pytest.raises(ConflictError) as caught:
            await service.patch(OWNER, b, 1, patch, "patch-once")
        assert caught.value.code == KEY_REUSED
        untouched = await service.get(OWNER, b)
        assert untouched.revision.revision == 1
        assert untouched.revision.title != "Renamed by patch"
        gate_evidence.record("other_schedule_patch", caught.value.code)
    finally:
        await storage.close()
