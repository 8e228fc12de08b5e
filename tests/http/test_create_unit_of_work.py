"""A create's authentication and its write share one unit of work (ADR 2395), and that
changes nothing a client sees: 401, then 403, come before any 422; a create refused
inside the write (422, 409) leaves nothing behind, not even its idempotency key; and
the unit of work is closed however the route ends (the pool is read after each)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from scheduling.domain.identity import Principal
from scheduling.service.schedules import ScheduleService
from simulation.worlds.http import OWNER, HttpWorld, body, http_world
from simulation.worlds.service import principal

NO_WRITE = principal("no-write", scopes={"schedule.read", "schedule.cancel"})
PAST = {"kind": "ONCE", "at": "2000-01-01T09:00:00Z"}
# Bodies refused with 422: by the body model, before the service; by the service's
# rules, with the write's unit of work open (the agent's read is in it).
INVALID: dict[str, dict[str, Any]] = {
    "model": {"title": ""},
    "past": {"cadence": PAST},
    "unknown_version": {"agent_version": "9.9.9-missing"},
}
CODES = {
    "model": "schedule.revision.empty_text",
    "past": "schedule.validation.no_future_occurrence",
    "unknown_version": "schedule.validation.agent_version_unknown",
}


def _code(response: Any) -> str:
    code: str = response.json()["error"]["code"]
    return code


def _checked_out(world: HttpWorld) -> int:
    pool: Any = world.plane.api.uow.engine.pool  # type: ignore[attr-defined]
    count: int = pool.checkedout()
    return count


async def _post(world: HttpWorld, key: str, who: Principal | None, **overrides: Any) -> Any:
    return await world.call(
        "POST", "/v1/schedules", who, json=body(**overrides), headers={"Idempotency-Key": key}
    )


async def test_refusals_keep_their_order_on_create(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, NO_WRITE]) as world:
        for name, overrides in INVALID.items():
            unauthenticated = await _post(world, name, None, **overrides)
            assert unauthenticated.status_code == 401, name
            assert _code(unauthenticated) == "schedule.http.unauthenticated"
            forbidden = await _post(world, name, NO_WRITE, **overrides)
            assert forbidden.status_code == 403, name
            assert _code(forbidden) == "schedule.auth.scope_required"
            invalid = await _post(world, name, OWNER, **overrides)
            assert invalid.status_code == 422, (name, invalid.text)
        assert _checked_out(world) == 0


async def test_a_refused_create_leaves_nothing(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        for name, overrides in INVALID.items():
            refused = await world.create(f"refused-{name}", **overrides)
            assert _code(refused) == CODES[name]
            assert refused.status_code == 422, (name, refused.text)
            # The key was not recorded: the same key now creates (a recorded key with
            # another request's hash would answer 409, see the test below).
            made = await world.create(f"refused-{name}")
            assert made.status_code == 201, (name, made.text)
        page = (await world.call("GET", "/v1/schedules")).json()
        assert len(page["items"]) == len(INVALID)
        assert _checked_out(world) == 0


async def test_every_ending_closes_the_unit_of_work(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER, NO_WRITE]) as world:
        # More requests than the pool holds connections, so a leak would also stall.
        for n in range(4):
            key = f"ending-{n}"
            endings = (
                (await world.create(key), 201),
                (await world.create(key), 200),  # the replay
                (await world.create(key, title="Another"), 409),  # the key reused
                (await world.create(f"bad-{n}", cadence=PAST), 422),
                (await _post(world, f"no-{n}", NO_WRITE), 403),
            )
            for response, status in endings:
                assert response.status_code == status, response.text
            assert _checked_out(world) == 0


async def test_a_recorded_key_answers_409_to_another_body(pg_url: str) -> None:
    """Test of the test: had a refused create recorded its key, the follow-up create
    above (another body under the same key) would be refused, not created."""
    async with http_world(pg_url, [OWNER]) as world:
        assert (await world.create("kept", title="First")).status_code == 201
        again = await world.create("kept")
        assert again.status_code == 409
        assert _code(again) == "schedule.idempotency.key_reused"


def _most_checked_out(world: HttpWorld) -> list[int]:
    """Records, at each connection checkout, how many the pool then has out."""
    engine: Any = world.plane.api.uow.engine  # type: ignore[attr-defined]
    seen: list[int] = []

    def on_checkout(*_: Any) -> None:
        seen.append(engine.pool.checkedout())

    event.listen(engine.sync_engine, "checkout", on_checkout)
    return seen


async def test_the_first_create_never_holds_two_connections(pg_url: str) -> None:
    """The idempotency secret's first read (a transaction of its own) comes before the
    write's checkout: a create never waits for a second connection while holding one."""
    async with http_world(pg_url, [OWNER]) as world:
        seen = _most_checked_out(world)
        assert (await world.create("first")).status_code == 201
        assert len(seen) == 2  # the key ring's read, then the create's one unit of work
        assert max(seen) == 1


async def test_the_checkout_count_sees_the_secret_read_inside_the_write(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: ``writing`` without loading the secret first makes the first
    create read it while its unit of work holds a connection."""

    async def late(self: ScheduleService, tenant_id: str, principal_id: str) -> Any:
        return self.reading(tenant_id, principal_id)

    monkeypatch.setattr(ScheduleService, "writing", late)
    async with http_world(pg_url, [OWNER]) as world:
        seen = _most_checked_out(world)
        assert (await world.create("first")).status_code == 201
        assert max(seen) == 2
