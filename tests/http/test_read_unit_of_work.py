"""A read's authentication and the read share one unit of work (ADR 2380), and that
changes nothing a client sees: 401, then 403, come before any parameter's 422, and the
unit of work is closed however the route ends (a leaked one would hold a pooled
connection: the pool is read after each kind of ending)."""

from __future__ import annotations

from typing import Any

from scheduling.domain.identity import Principal
from simulation.worlds.http import OWNER, HttpWorld, http_world
from simulation.worlds.service import principal

NO_READ = principal("no-read", scopes={"schedule.write", "schedule.cancel"})
BAD = "not-a-uuid"
# Each read route with a parameter the route refuses (422) once authorized.
INVALID = (
    f"/v1/schedules/{BAD}",
    f"/v1/schedules/{BAD}/occurrences",
    "/v1/schedules?limit=0",
    "/v1/schedules?state=BOGUS",
    f"/v1/schedules?cursor={'c' * 600}",
    "/v1/schedules/00000000-0000-4000-8000-000000000009/occurrences?limit=101",
)


def _code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def _checked_out(world: HttpWorld) -> int:
    pool: Any = world.plane.api.uow.engine.pool  # type: ignore[attr-defined]
    count: int = pool.checkedout()
    return count


async def _status(world: HttpWorld, path: str, who: Principal | None) -> tuple[int, str]:
    response = await world.call("GET", path, who)
    return response.status_code, _code(response)


async def test_refusals_keep_their_order_on_the_read_routes(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, NO_READ]) as world:
        for path in INVALID:
            assert await _status(world, path, None) == (401, "schedule.http.unauthenticated")
            assert await _status(world, path, NO_READ) == (403, "schedule.auth.scope_required")
            status, _ = await _status(world, path, OWNER)
            assert status == 422, path
        assert _checked_out(world) == 0


async def test_every_ending_closes_the_unit_of_work(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, NO_READ]) as world:
        made = (await world.create("closing")).json()
        missing = "00000000-0000-4000-8000-000000000009"
        endings = {
            f"/v1/schedules/{made['id']}": 200,
            "/v1/schedules": 200,
            f"/v1/schedules/{made['id']}/occurrences": 200,
            f"/v1/schedules/{missing}": 404,
            f"/v1/schedules/{missing}/occurrences": 404,
            f"/v1/schedules/{BAD}": 422,
        }
        # More requests than the pool holds connections, so a leak would also stall.
        for _ in range(4):
            for path, status in endings.items():
                assert (await world.call("GET", path)).status_code == status, path
                assert _checked_out(world) == 0, path
        forbidden = await world.call("GET", "/v1/schedules", NO_READ)
        assert forbidden.status_code == 403
        assert _checked_out(world) == 0


async def test_the_pool_count_sees_an_open_unit_of_work(pg_url: str) -> None:
    """Test of the test: a unit of work held open shows in the count."""
    async with http_world(pg_url, [OWNER]) as world:
        async with world.plane.api.service.reading(OWNER.tenant_id, OWNER.principal_id) as uow:
            await uow.principals.get(OWNER.tenant_id, OWNER.principal_id)
            assert _checked_out(world) == 1
        assert _checked_out(world) == 0
