"""A guarded route's unit of work is closed before its response starts (ADR 2620).

``auth.guarded`` is a plain dependency that hands the unit of work it opens to
``EdgeMiddleware``, which closes it when the response starts (or when the request ends
without one). Seen from outside the app: at the moment any response of a guarded route
starts, on every kind of ending, no pooled connection is checked out, so the rollback
(or the create's commit) has happened before the client can see a byte.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scheduling.http.app import create_app
from simulation.worlds.http import OWNER, HttpWorld, body, http_world
from simulation.worlds.service import principal

NO_READ = principal("no-read", scopes={"schedule.write", "schedule.cancel"})
MISSING = "00000000-0000-4000-8000-000000000009"


class AtStart:
    """The outermost ASGI layer: the API pool's checked-out count at each response start
    (``hold``: a unit of work this layer keeps open around the request, for the test
    of the test)."""

    def __init__(self, app: ASGIApp, plane: Any) -> None:
        self.app, self.plane = app, plane
        self.seen: list[int] = []
        self.hold = False

    def checked_out(self) -> int:
        count: int = self.plane.api.uow.engine.pool.checkedout()
        return count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.seen.append(self.checked_out())
            await send(message)

        if not self.hold:
            await self.app(scope, receive, watched)
            return
        service = self.plane.api.service
        async with service.reading(OWNER.tenant_id, OWNER.principal_id) as uow:
            await uow.principals.get(OWNER.tenant_id, OWNER.principal_id)
            await self.app(scope, receive, watched)


async def _endings(world: HttpWorld) -> list[int]:
    made = await world.create("release")
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    statuses = [made.status_code]
    for path, who in [
        (f"/v1/schedules/{sid}", OWNER),  # 200
        ("/v1/schedules", OWNER),  # 200
        (f"/v1/schedules/{sid}/occurrences", OWNER),  # 200
        (f"/v1/schedules/{MISSING}", OWNER),  # 404 from the service
        ("/v1/schedules?limit=0", OWNER),  # 422 after the principal read
        ("/v1/schedules", NO_READ),  # 403 after the principal read
    ]:
        statuses.append((await world.call("GET", path, who)).status_code)
    refused = await world.create("release-bad", cadence={"kind": "DAILY"})  # 422
    statuses.append(refused.status_code)
    replay = await world.call(
        "POST", "/v1/schedules", OWNER, json=body(), headers={"Idempotency-Key": "release"}
    )
    statuses.append(replay.status_code)  # the same body again: a 200 replay
    return statuses


async def test_every_guarded_ending_has_closed_its_unit_of_work_when_the_response_starts(
    pg_url: str,
) -> None:
    layers: list[AtStart] = []

    def factory(plane: Any) -> ASGIApp:
        layers.append(AtStart(create_app(plane), plane))
        return layers[-1]

    async with http_world(pg_url, [OWNER, NO_READ], app_factory=factory) as world:
        statuses = await _endings(world)
        assert statuses == [201, 200, 200, 200, 404, 422, 403, 422, 200], statuses
        assert layers[0].seen == [0] * len(statuses), (statuses, layers[0].seen)


async def test_the_check_sees_a_unit_of_work_open_at_the_start(pg_url: str) -> None:
    """Test of the test: with a unit of work held open across the request (what a
    release after the response would look like), the layer counts it."""
    layers: list[AtStart] = []

    def factory(plane: Any) -> ASGIApp:
        layers.append(AtStart(create_app(plane), plane))
        return layers[-1]

    async with http_world(pg_url, [OWNER], app_factory=factory) as world:
        layers[0].hold = True
        response = await world.call("GET", "/v1/schedules", OWNER)
        assert response.status_code == 200
        assert layers[0].seen == [1]
