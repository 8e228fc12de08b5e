"""rule.http.definition_validation over a real uvicorn server against PostgreSQL: every
refusal the spec lists, one field wrong at a time, on the create and on the
full-definition update, each answered with its own stable ``schedule.*`` code in the
envelope and nothing written.

The caller holds ``memory.read`` and ``schedule.*`` but not ``browser.profile.read``;
the tenant's ceilings (``simulation.worlds.service.CEILINGS``) allow a 3,600 s timeout,
a 7,200 s grace and a USD 10 run. A valid body is accepted first (so a refusal is the
field's, not the world's), and the same body with each field broken is refused.

Tests of the test: ``scheduling-gates mutate`` (``validation.scope_beyond_the_caller``,
``validation.policy_mismatch_accepted``, ``validation.ceilings_unchecked``,
``models.open_bodies``, ``models.integral_truncates``). An unknown scope is refused by
the edge's request model before the service's own check, with the same code. Beside the
spec's list, the edge's own refusals (a field the schema lacks, a number that is not an
integer where one is expected) are ``schedule.http.invalid_request``, also writing
nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import ValidationError
from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body
from simulation.worlds.materialize import WHO as MATERIALIZE_WHO
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import POLICY, principal

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.definition_validation")]

CALLER = principal("validation-owner", scopes=OWNER.scopes - {"browser.profile.read"})
PARIS = {"timezone": "Europe/Paris", "local_time": "09:00"}
LIMITS = body()["limits"]
# The spec's list, one wrong field each, and the code that must name it.
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "unknown cadence field": (
        {"cadence": {"kind": "DAILY", **PARIS, "every": 2}},
        "schedule.cadence.unknown_field",
    ),
    "naive datetime": (
        {"cadence": {"kind": "ONCE", "at": "2030-01-01T09:00:00"}},
        "schedule.cadence.naive_instant",
    ),
    "invalid IANA zone": (
        {"cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Atlantis"}},
        "schedule.cadence.invalid_timezone",
    ),
    "duplicate weekday": (
        {"cadence": {"kind": "WEEKLY", **PARIS, "weekdays": [1, 1]}},
        "schedule.cadence.weekday_duplicate",
    ),
    "out-of-range weekday": (
        {"cadence": {"kind": "WEEKLY", **PARIS, "weekdays": [8]}},
        "schedule.cadence.weekday_out_of_range",
    ),
    "duplicate monthly day": (
        {"cadence": {"kind": "MONTHLY", **PARIS, "days_of_month": [3, 3]}},
        "schedule.cadence.day_duplicate",
    ),
    "out-of-range monthly day": (
        {"cadence": {"kind": "MONTHLY", **PARIS, "days_of_month": [32]}},
        "schedule.cadence.day_out_of_range",
    ),
    "empty monthly selector": (
        {"cadence": {"kind": "MONTHLY", **PARIS, "days_of_month": [], "last_day": False}},
        "schedule.cadence.monthly_selector_empty",
    ),
    "duplicate yearly date": (
        {
            "cadence": {
                "kind": "YEARLY",
                **PARIS,
                "dates": [{"month": 5, "day": 1}, {"month": 5, "day": 1}],
            }
        },
        "schedule.cadence.yearly_date_duplicate",
    ),
    "impossible yearly date": (
        {"cadence": {"kind": "YEARLY", **PARIS, "dates": [{"month": 2, "day": 30}]}},
        "schedule.cadence.yearly_date_impossible",
    ),
    "empty yearly selector": (
        {"cadence": {"kind": "YEARLY", **PARIS, "dates": []}},
        "schedule.cadence.yearly_selector_empty",
    ),
    "non-positive step bound": (
        {"limits": {**LIMITS, "max_steps": 0}},
        "schedule.limits.non_positive_bound",
    ),
    "non-positive timeout": (
        {"run_timeout_seconds": 0},
        "schedule.revision.non_positive_timeout",
    ),
    "timeout above the ceiling": (
        {"run_timeout_seconds": 3601},
        "schedule.validation.ceiling_exceeded",
    ),
    "grace above the ceiling": (
        {"misfire_grace_seconds": 7201},
        "schedule.validation.ceiling_exceeded",
    ),
    "cost above the ceiling": (
        {"limits": {**LIMITS, "max_cost": "10.01"}},
        "schedule.validation.ceiling_exceeded",
    ),
    "unknown scope": (
        {"requested_scopes": ["memory.read", "memory.obliterate"]},
        "schedule.validation.unknown_scope",
    ),
    "a scope the caller lacks": (
        {"requested_scopes": ["memory.read", "browser.profile.read"]},
        "schedule.validation.scope_not_held",
    ),
    "mismatched agent policy": (
        {"policy_profile": "another-profile"},
        "schedule.validation.policy_mismatch",
    ),
    "the agent's policy in other letters": (
        {"policy_profile": POLICY.upper()},
        "schedule.validation.policy_mismatch",
    ),
    "secret-like instruction": (
        {"instruction": "Log in with password: hunter2-Xq9!zz and check the inbox."},
        "schedule.secret_detected",
    ),
}


INVALID_REQUEST = "schedule.http.invalid_request"
# The edge's own refusals: every request model is closed and its integers strict, so a
# field the schema lacks, or a number that is not an integer where one is expected, is
# refused before the service sees the body (never dropped, rounded or coerced).
EDGE_REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "an unknown body field": ({"priority": 1}, INVALID_REQUEST),
    "an unknown limits field": ({"limits": {**LIMITS, "max_minutes": 5}}, INVALID_REQUEST),
    "a fractional timeout": ({"run_timeout_seconds": 600.5}, INVALID_REQUEST),
    "a fractional step bound": ({"limits": {**LIMITS, "max_steps": 2.5}}, INVALID_REQUEST),
    "a timeout as text": ({"run_timeout_seconds": "600"}, INVALID_REQUEST),
    "a failure limit as a boolean": ({"max_consecutive_failures": True}, INVALID_REQUEST),
}


async def rows(world: HttpWorld) -> dict[str, Any]:
    return {
        "counts": await world.counts(),
        "schedules": await world.sql("SELECT * FROM schedules ORDER BY id"),
    }


async def test_every_listed_refusal_has_its_code_and_writes_nothing(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, (OWNER, CALLER)) as world:
        created = await world.create("validation-valid", CALLER)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}", CALLER)).json()
        settled = await rows(world)
        wrong: dict[str, Any] = {}
        for n, (name, (change, code)) in enumerate({**REFUSED, **EDGE_REFUSED}.items()):
            made = await world.create(f"validation-{n}", CALLER, **change)
            updated = await world.call(
                "PATCH", f"/v1/schedules/{sid}", CALLER, json=update_body(detail, **change)
            )
            for route, answer in (("create", made), ("update", updated)):
                document = answer.json()
                got = document.get("error", {}).get("code")
                if answer.status_code != 422 or got != code:
                    wrong[f"{route} {name}"] = (answer.status_code, got, code)
            if await rows(world) != settled:
                wrong[f"{name} wrote"] = True
                settled = await rows(world)
        assert wrong == {}, sorted(wrong.items())
    gate_evidence.record("refusals", sorted(REFUSED))
    gate_evidence.record("edge_refusals", sorted(EDGE_REFUSED))


RESERVED = {**LIMITS, "reserve_steps": 2, "reserve_model_calls": 1, "reserve_cost": "0.5"}
"""An accepted body's limits with every final-synthesis reserve set (spec: a revision
may pin positive reserves within its finite limits)."""


async def test_every_accepted_limit_is_kept(pg_url: str, gate_evidence: GateEvidence) -> None:
    """What the edge accepts it keeps: limits with reserves, sent on the create and then
    changed on the full-definition update, read back from the point read exactly (none
    dropped to its default)."""
    async with http_world(pg_url, (OWNER, CALLER)) as world:
        created = await world.create("validation-reserves", CALLER, limits=RESERVED)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}", CALLER)).json()
        assert detail["revision"]["limits"] == RESERVED, detail["revision"]["limits"]
        changed = {**RESERVED, "reserve_steps": 3, "reserve_model_calls": 2, "reserve_cost": "1"}
        updated = await world.call(
            "PATCH", f"/v1/schedules/{sid}", CALLER, json=update_body(detail, limits=changed)
        )
        assert updated.status_code == 200, updated.text
        again = (await world.call("GET", f"/v1/schedules/{sid}", CALLER)).json()
        assert again["current_revision"] == 2, again
        assert again["revision"]["limits"] == changed, again["revision"]["limits"]
    gate_evidence.record("limits_kept", {"create": RESERVED, "update": changed})


NO_FUTURE = "schedule.validation.no_future_occurrence"


async def test_a_one_time_instant_must_be_strictly_after_now(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """A one-time instant equal to the server's now has no occurrence strictly after
    now: the create and the full-definition update refuse it with its code and write
    nothing; one microsecond later is accepted (the bound is exact, not off by one)."""
    async with http_world(pg_url, (OWNER, CALLER)) as world:
        now = world.clock.now()
        at_now = {"kind": "ONCE", "at": format_instant(now)}
        just_after = {"kind": "ONCE", "at": format_instant(now + timedelta(microseconds=1))}
        settled = await rows(world)
        refused = await world.create("validation-at-now", CALLER, cadence=at_now)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == NO_FUTURE
        assert await rows(world) == settled
        created = await world.create("validation-just-after", CALLER, cadence=just_after)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}", CALLER)).json()
        settled = await rows(world)
        updated = await world.call(
            "PATCH", f"/v1/schedules/{sid}", CALLER, json=update_body(detail, cadence=at_now)
        )
        assert updated.status_code == 422, updated.text
        assert updated.json()["error"]["code"] == NO_FUTURE
        assert await rows(world) == settled
    gate_evidence.record("one_time_bound", {"at_now": NO_FUTURE, "now_plus_1us": 201})


async def test_requested_scopes_are_checked_against_current_authority(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """Through the schedule service (the front door the model tools share): a caller
    whose presented scopes still name memory.read after the directory revoked it cannot
    request it; the refusal is scope_not_held and no schedule is written."""
    h = await MaterializeWorld.open(pg_url)
    try:
        await h.set_principal(scopes=MATERIALIZE_WHO.scopes - {"memory.read"})
        with pytest.raises(ValidationError) as refused:
            await h.create(key="validation-revoked")
        assert refused.value.code == "schedule.validation.scope_not_held"
        assert (await h.counts())["process_events"] == 0
        assert await h.sql("SELECT id FROM schedules") == []
        gate_evidence.record("revoked_scope", refused.value.code)
    finally:
        await h.close()
