"""``rule.http.definition_validation`` at the edges of a definition's values, over a real
uvicorn server against PostgreSQL.

Every integer the product stores is a PostgreSQL ``integer``, so the edge takes
1..2^31-1 (ADR 2132) and the OpenAPI document says so.

The largest value is a value like any other: a failure policy of 2^31-1 is accepted and
read back exactly, and an expected revision of 2^31-1 (in a pause or resume body, the
cancel's query, the full-definition PATCH) is a stale revision (409), not a malformed
one. One more is the 422 ``schedule.http.invalid_request`` on each of them and on a
limit, never a 5xx, and writes nothing.

What a body leaves out is what the spec makes the default: limits without the
final-synthesis reserves pin all-zero reserves (the unreserved behaviour), read back
so.

Tests of the test: ``scheduling-gates mutate`` (``models.int32_bound_off_by_one``,
``models.int32_unbounded``, ``routes.cancel_revision_unbounded``,
``models.reserve_steps_default_one``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import HttpWorld, body, http_world, update_body

pytestmark = pytest.mark.postgres

RULE = "rule.http.definition_validation"
INT32_MAX = 2**31 - 1
"""PostgreSQL's largest ``integer``."""


def code_of(response: httpx.Response) -> str | None:
    document = response.json()
    error = document.get("error") if isinstance(document, dict) else None
    return error.get("code") if isinstance(error, dict) else None


async def declared(world: HttpWorld) -> None:
    """The document declares the bound where the edge enforces it."""
    document = (await world.client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    for model, field in (
        ("CreateScheduleBody", "max_consecutive_failures"),
        ("UpdateScheduleBody", "expected_revision"),
        ("RevisionGuard", "expected_revision"),
    ):
        assert schemas[model]["properties"][field]["maximum"] == INT32_MAX, (model, field)
    delete = document["paths"]["/v1/schedules/{schedule_id}"]["delete"]
    (guard,) = [p for p in delete["parameters"] if p["name"] == "expected_revision"]
    assert guard["schema"]["maximum"] == INT32_MAX


async def guarded(world: HttpWorld, sid: str, revision: int) -> dict[str, httpx.Response]:
    """Every revision-guarded write of ``sid`` with ``revision`` as the guard."""
    detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    guard = {"expected_revision": revision}
    patch = update_body(detail, title="Bound", expected_revision=revision)
    return {
        "pause": await world.call("POST", f"/v1/schedules/{sid}/pause", json=guard),
        "resume": await world.call("POST", f"/v1/schedules/{sid}/resume", json=guard),
        "cancel": await world.call("DELETE", f"/v1/schedules/{sid}", params=guard),
        "update": await world.call("PATCH", f"/v1/schedules/{sid}", json=patch),
    }


async def bounds(world: HttpWorld) -> dict[str, Any]:
    await declared(world)
    largest = await world.create("bound-max", max_consecutive_failures=INT32_MAX)
    assert largest.status_code == 201, largest.text
    sid = largest.json()["id"]
    read = await world.call("GET", f"/v1/schedules/{sid}")
    assert read.json()["revision"]["max_consecutive_failures"] == INT32_MAX, read.text
    before = await world.counts()

    answers: dict[str, Any] = {}
    for label, response in (await guarded(world, sid, INT32_MAX)).items():
        assert response.status_code == 409, (label, response.text)
        assert code_of(response) == "schedule.lifecycle.stale_revision", (label, response.text)
        answers[f"{label} at 2^31-1"] = response.status_code
    over = INT32_MAX + 1
    too_large = dict(await guarded(world, sid, over))
    limits = {**body()["limits"], "max_steps": over}
    too_large["failure policy"] = await world.create("bound-over", max_consecutive_failures=over)
    too_large["step limit"] = await world.create("bound-steps", limits=limits)
    for label, response in too_large.items():
        assert response.status_code == 422, (label, response.status_code, response.text)
        assert code_of(response) == "schedule.http.invalid_request", (label, response.text)
        answers[f"{label} at 2^31"] = response.status_code
    assert await world.counts() == before, "a refused bound wrote"
    (row,) = await world.sql("SELECT state, current_revision FROM schedules")
    assert (row["state"], row["current_revision"]) == ("ACTIVE", 1), row
    return answers


@pytest.mark.rule(RULE)
async def test_the_integer_bound_is_inclusive_and_enforced(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        answers = await bounds(world)
    gate_evidence.record("answers", answers)


RESERVES = ("reserve_steps", "reserve_model_calls", "reserve_cost")


@pytest.mark.rule(RULE)
async def test_limits_without_reserves_pin_none(pg_url: str) -> None:
    """Spec "Sessions, context, and results": all-zero reserve fields retain the
    unreserved behaviour; a body that sends none asks for none."""
    async with http_world(pg_url) as world:
        limits = {k: v for k, v in body()["limits"].items() if k not in RESERVES}
        created = await world.create("no-reserves", limits=limits)
        assert created.status_code == 201, created.text
        read = await world.call("GET", f"/v1/schedules/{created.json()['id']}")
        pinned = read.json()["revision"]["limits"]
        assert pinned["reserve_steps"] == 0, pinned
        assert pinned["reserve_model_calls"] == 0, pinned
        assert Decimal(pinned["reserve_cost"]) == 0, pinned
        for name in ("max_steps", "max_model_calls", "max_tool_calls"):
            assert pinned[name] == limits[name], (name, pinned)
        assert Decimal(pinned["max_cost"]) == Decimal(str(limits["max_cost"])), pinned
