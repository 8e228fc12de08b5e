"""Cadence values at the edges of what they can hold.

* gate.schedule.model_create_validation: "A past or non-timezone-aware at instant
  returns a stable argument failure and leaves no schedule state." ``0001-01-01T00:00
  +01:00`` is a past instant that lies before the first UTC instant a datetime holds
  (its conversion to UTC overflows), and ``9999-12-31T23:59:59-01:00`` one after the
  last: through schedule.create each is a stable non-retryable ``schedule.*`` argument
  failure with no schedule written, never an internal error (mutant
  ``domain.once_at_overflow_uncaught``: the OverflowError escapes).
* rule.http.definition_validation: "Validation rejects unknown cadence fields". A
  yearly selector's date is part of the closed cadence: a date with a field beside
  month and day is the 422 ``schedule.cadence.unknown_field`` over HTTP, nothing
  written, never dropped (mutant ``domain.yearly_date_extra_field``).
"""

from __future__ import annotations

import pytest

from gates.checks.edge_support import error_code
from gates.checks.tool_support import ToolWorld
from simulation.worlds.http import http_world

pytestmark = pytest.mark.postgres

UNREPRESENTABLE = ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00")


@pytest.mark.gate("gate.schedule.model_create_validation")
async def test_unrepresentable_one_time_instants_are_argument_failures(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        outcomes = {}
        for n, at in enumerate(UNREPRESENTABLE):
            args = {"title": "Edge of time", "instruction": "Remind me.", "at": at}
            result = await world.call("schedule.create", args, f"edge-of-time-{n}")
            outcomes[at] = (
                result.ok,
                (result.reason_code or "").startswith("schedule."),
                result.retryable,
            )
        assert outcomes == {at: (False, True, False) for at in UNREPRESENTABLE}, outcomes
        assert (await world.counts())["schedules"] == 0
    finally:
        await world.close()


@pytest.mark.rule("rule.http.definition_validation")
async def test_a_yearly_date_is_closed(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        yearly = {
            "kind": "YEARLY",
            "local_time": "09:00",
            "timezone": "Europe/Paris",
            "dates": [{"month": 3, "day": 14}],
        }
        accepted = await world.create("yearly-closed-ok", cadence=yearly)
        assert accepted.status_code == 201, accepted.text
        before = await world.counts()
        extra = {**yearly, "dates": [{"month": 3, "day": 14, "note": "pi day"}]}
        refused = await world.create("yearly-closed-extra", cadence=extra)
        assert refused.status_code == 422, refused.text
        assert error_code(refused.json()) == "schedule.cadence.unknown_field", refused.text
        assert await world.counts() == before
