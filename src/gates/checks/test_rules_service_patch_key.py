"""rule.http.update_replay on the closed conversational patch (``ScheduleService.patch``):
the key names the patch's ``at`` value, not only that an ``at`` was given. A keyed
patch moving the schedule to one instant is applied, the identical patch replays it,
and the same key with another instant - and with the same instant and a title added -
is ``schedule.idempotency.key_reused`` and writes no revision, through the service the
composition root builds on PostgreSQL.

``test_rules_patch_key`` applies a cadence patch first, so its ``at`` conflict differs
from the applied patch by which field is present, whatever the instant.

Tests of the test: ``scheduling-gates mutate`` (``svc.patch_hash_at_as_given``: the
patch's request hash keeps only that an ``at`` was given).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import ConflictError
from scheduling.service import SchedulePatch
from scheduling.testing import open_storage
from simulation.worlds.service import build_world, definition, principal, seed_durable

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.update_replay")]

KEY_REUSED = "schedule.idempotency.key_reused"
OWNER = principal("patch-at-owner")


async def test_a_patch_key_names_its_instant(pg_url: str) -> None:
    storage = open_storage(pg_url, pool_size=2)
    try:
        await seed_durable(storage.factory("trusted"), [OWNER])
        world = build_world(storage)
        service = world.service
        sid = (await service.create(OWNER, "patch-at-create", definition())).schedule.id
        now = world.clock.now().replace(microsecond=0)
        first_at = format_instant(now + timedelta(days=3))
        other_at = format_instant(now + timedelta(days=4))
        first = SchedulePatch(at=first_at)
        applied = await service.patch(OWNER, sid, 1, first, "patch-at-key")
        assert (applied.schedule.current_revision, applied.replayed) == (2, False)
        again = await service.patch(OWNER, sid, 1, first, "patch-at-key")
        assert (again.schedule.current_revision, again.replayed) == (2, True)
        for label, other in (
            ("another instant", SchedulePatch(at=other_at)),
            ("a title added", SchedulePatch(at=first_at, title="Another title")),
        ):
            with pytest.raises(ConflictError) as caught:
                await service.patch(OWNER, sid, 1, other, "patch-at-key")
            assert caught.value.code == KEY_REUSED, label
        current = await service.get(OWNER, sid)
        assert current.revision.revision == 2
        assert current.schedule.next_fire_at == now + timedelta(days=3)
    finally:
        await storage.close()
