"""rule.http.update_replay on the closed conversational patch (``ScheduleService.patch``,
the write behind the model's ``schedule.update``): its idempotency key names the whole
patch. The identical keyed patch replays; the same key with another cadence, ``at``,
title or instruction (the patch's every field) is ``schedule.idempotency.key_reused``
and writes no revision, through the service built by the composition root on
PostgreSQL.

Test of the test: ``scheduling-gates mutate`` (``values.patch_hash_ignores_cadence``:
the patch's request hash leaves out its cadence, so another cadence under the key
replays the first patch instead of failing closed).
"""

from __future__ import annotations

from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import parse_cadence
from scheduling.domain.errors import ConflictError
from scheduling.service import SchedulePatch
from scheduling.testing import open_storage
from simulation.worlds.service import build_world, definition, principal, seed_durable

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.update_replay")]

KEY_REUSED = "schedule.idempotency.key_reused"
OWNER = principal("patch-owner")
PARIS = "Europe/Paris"


def _daily(local_time: str) -> dict[str, Any]:
    return {"kind": "DAILY", "local_time": local_time, "timezone": PARIS}


async def test_a_patch_key_names_every_field_of_its_patch(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    storage = open_storage(pg_url, pool_size=2)
    try:
        await seed_durable(storage.factory("trusted"), [OWNER])
        world = build_world(storage)
        service = world.service
        sid = (await service.create(OWNER, "patch-create", definition())).schedule.id
        first = SchedulePatch(cadence=_daily("10:00"))
        applied = await service.patch(OWNER, sid, 1, first, "patch-key")
        assert applied.schedule.current_revision == 2
        assert not applied.replayed
        again = await service.patch(OWNER, sid, 1, first, "patch-key")
        assert again.replayed
        assert again.schedule.current_revision == 2
        # Each differs from the applied patch in one field only.
        others = {
            "cadence": SchedulePatch(cadence=_daily("11:00")),
            "at": SchedulePatch(at="2026-03-09T08:00:00Z"),
            "title": SchedulePatch(title="Another title", cadence=_daily("10:00")),
            "instruction": SchedulePatch(instruction="Other words.", cadence=_daily("10:00")),
        }
        for field, other in others.items():
            with pytest.raises(ConflictError) as caught:
                await service.patch(OWNER, sid, 1, other, "patch-key")
            assert caught.value.code == KEY_REUSED, field
            gate_evidence.append("key_reused_by_field", field)
        current = await service.get(OWNER, sid)
        assert current.revision.revision == 2
        assert current.revision.cadence == parse_cadence(_daily("10:00")).to_payload()
    finally:
        await storage.close()
