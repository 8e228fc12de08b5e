"""A create computes its first fire instant and its ``RunLimits`` once (ADR 2600).

Counted, not timed, over the memory storage: ``next_after`` in every service module
that imported it, and ``RunLimits`` at its class. Before ADR 2600 a create computed the
first instant twice (``require_future``'s check, then ``next_fire_at``) and built the
limits twice (the request hash, then validation): these counts were 2 and 2. The
values are the ones computed before: the stored ``next_fire_at`` is ``next_after`` of
the cadence at the create's instant, the revision's limits those of the request.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import pytest

from scheduling.domain.cadence import parse_cadence
from scheduling.domain.errors import SchedulingError, ValidationError
from scheduling.domain.recurrence import engine
from scheduling.domain.revision import RunLimits
from scheduling.testing import MemoryStorage
from simulation.worlds.service import LIMITS, ServiceWorld, build_world, definition, principal

ALICE = principal("alice")


@pytest.fixture
def world() -> ServiceWorld:
    return build_world(MemoryStorage(), principals=[ALICE])


def _count(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counts: Counter[str] = Counter()
    original_next = engine.next_after

    def next_after(*args: Any, **kwargs: Any) -> Any:
        counts["next_after"] += 1
        return original_next(*args, **kwargs)

    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if name.startswith("scheduling.service") and (
            getattr(module, "next_after", None) is original_next
        ):
            monkeypatch.setattr(module, "next_after", next_after)
    original_init = RunLimits.__init__

    def init(self: RunLimits, **data: Any) -> None:
        counts["run_limits"] += 1
        original_init(self, **data)

    monkeypatch.setattr(RunLimits, "__init__", init)
    return counts


async def test_a_create_computes_the_first_fire_and_the_limits_once(
    world: ServiceWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    await world.service.create(ALICE, "warm", definition())
    counts = _count(monkeypatch)
    # The HTTP edge hands the limits as JSON (``to_definition``): they are built here.
    created = await world.service.create(ALICE, "once", definition(limits=dict(LIMITS.to_json())))
    assert counts["next_after"] == 1
    assert counts["run_limits"] == 1
    now = world.clock.now()
    cadence = parse_cadence(definition().cadence)
    assert created.schedule.next_fire_at == engine.next_after(cadence, now)
    assert created.revision is not None
    assert created.revision.limits == LIMITS


async def test_the_counters_see_a_limit_built_twice(
    world: ServiceWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: an update (whose hash and validation still build their own
    limits, and whose validation and state change each compute the next instant) shows
    as two of each."""
    created = await world.service.create(ALICE, "u", definition())
    counts = _count(monkeypatch)
    await world.service.update(
        ALICE,
        created.schedule.id,
        1,
        definition(title="Evening briefing", limits=dict(LIMITS.to_json())),
        "u2",
    )
    assert counts["run_limits"] == 2
    assert counts["next_after"] == 2


async def test_a_cadence_without_a_future_instant_still_fails_first(
    world: ServiceWorld,
) -> None:
    # The first-fire instant is now carried out of validation: a cadence without one
    # still fails there, with its own code, before anything is written.
    past = definition(cadence={"kind": "ONCE", "at": "2000-01-01T00:00:00Z"})
    with pytest.raises(ValidationError) as caught:
        await world.service.create(ALICE, "past", past)
    assert caught.value.code == "schedule.validation.no_future_occurrence"
    # Invalid limits fail with the code the limits themselves raise, as before.
    with pytest.raises(SchedulingError) as direct:
        RunLimits(**{"max_steps": 0})
    with pytest.raises(SchedulingError) as bad:
        await world.service.create(ALICE, "bad", definition(limits={"max_steps": 0}))
    assert bad.value.code == direct.value.code
