"""The lifecycle gate's driver and checker catch a broken service (a test of the test).

The same ``HistoryDriver`` and model the gate uses run over the in-memory adapters,
first with the real service (no violation), then with a service whose resume reopens
a cancelled schedule, and one whose resume backfills paused time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

import scheduling.service.schedules as schedules_module
from scheduling.adapters.memory import MemoryUnitOfWorkFactory
from scheduling.domain.cadence import Cadence
from scheduling.domain.errors import ValidationError
from scheduling.domain.lifecycle import Action, Decision, decide
from scheduling.domain.schedule import ScheduleState
from scheduling.testing import MemoryStorage
from simulation.engine.checkers import check_linearizable_per_key
from simulation.worlds.lifecycle import HistoryDriver, Op
from simulation.worlds.service import build_world, principal

WHO = principal("alice")
PLAN = [
    ([Op("pause", 0), Op("cancel", 1), Op("due", 0)], 3 * 86400),
    ([Op("resume", 0), Op("resume", 1), Op("due", 0)], 86400 + 3600),
    ([Op("due", 0), Op("update", 0, cadence=1)], 0),
]


async def violations() -> list[str]:
    uow = MemoryUnitOfWorkFactory()
    world = build_world(MemoryStorage(uow), principals=[WHO])
    driver = HistoryDriver(world, uow, WHO)
    await driver.create(2)
    for batch, advance in PLAN:
        await driver.batch(batch)
        world.clock.advance(advance)
    found = check_linearizable_per_key(
        driver.history, driver.model_for, key=lambda op: op.args["schedule"]
    )
    return [v.message for v in found]


async def test_the_real_service_is_linearizable() -> None:
    assert await violations() == []


async def test_a_service_that_reopens_cancellation_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reopening(action: Action, state: ScheduleState, current: int, expected: Any) -> Decision:
        if action is Action.RESUME and state is ScheduleState.CANCELLED:
            return Decision(action, state, ScheduleState.ACTIVE, noop=False, pause_reason=None)
        return decide(action, state, current, expected)

    monkeypatch.setattr(schedules_module, "decide", reopening)
    assert await violations()


async def test_a_service_that_backfills_paused_time_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = schedules_module.next_after

    def backfilling(cadence: Cadence, now: datetime) -> datetime | None:
        return real(cadence, now - timedelta(days=3))

    monkeypatch.setattr(schedules_module, "next_after", backfilling)
    assert await violations()


async def test_a_service_that_refuses_every_resume_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A non-conflict error from a legal operation is judged, not recorded as "no
    effect": refusing every resume (a stable ``schedule.*`` code, no traceback) is a
    violation of the sequential model."""

    async def refusing(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise ValidationError("schedule.lifecycle.resume_refused", "resume refused")

    monkeypatch.setattr(schedules_module.ScheduleService, "resume", refusing)
    found = await violations()
    assert found, "a service refusing every resume passed the lifecycle check"
