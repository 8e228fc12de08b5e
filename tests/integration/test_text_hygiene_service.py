"""Text hygiene at the service boundary (issue 23 findings 1 and 2): ``ScheduleService``
refuses a NUL or a lone surrogate in every text of a definition, a patch and the
idempotency key with ``schedule.text.invalid`` before hashing, scanning or storing, so
HTTP, model tools, MCP and the CLI (which all call it) answer the same."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.errors import ValidationError
from scheduling.service import SchedulePatch
from scheduling.testing import MemoryStorage
from simulation.worlds.service import ServiceWorld, build_world, definition, principal

ALICE = principal("alice")
BAD = ("\x00", "\ud800", "\udfff")

CREATE_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("title", {"title": "Brief {bad}"}),
    ("instruction", {"instruction": "Summarize {bad} news"}),
    (
        "cadence.timezone",
        {"cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/{bad}"}},
    ),
    (
        "cadence.local_time",
        {"cadence": {"kind": "DAILY", "local_time": "09{bad}", "timezone": "UTC"}},
    ),
    ("cadence.kind", {"cadence": {"kind": "DAILY{bad}", "local_time": "09:00", "timezone": "UTC"}}),
    ("requested_scopes[0]", {"requested_scopes": frozenset({"memory.read{bad}"})}),
    ("agent_version", {"agent_version": "v{bad}"}),
    ("policy_profile", {"policy_profile": "default{bad}"}),
]


def _fill(value: Any, bad: str) -> Any:
    if isinstance(value, str):
        return value.replace("{bad}", bad)
    if isinstance(value, dict):
        return {k: _fill(v, bad) for k, v in value.items()}
    if isinstance(value, frozenset):
        return frozenset(_fill(v, bad) for v in value)
    return value


@pytest.fixture
def world() -> ServiceWorld:
    return build_world(MemoryStorage(), principals=[ALICE])


async def _stored(world: ServiceWorld) -> int:
    return len((await world.service.list(ALICE)).items)


@pytest.mark.parametrize("bad", BAD, ids=["nul", "high", "low"])
@pytest.mark.parametrize(("field", "overrides"), CREATE_FIELDS, ids=[f for f, _ in CREATE_FIELDS])
async def test_create_refuses_unstorable_text(
    world: ServiceWorld, field: str, overrides: dict[str, Any], bad: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        await world.service.create(ALICE, "key-1", definition(**_fill(overrides, bad)))
    assert raised.value.code == "schedule.text.invalid"
    assert raised.value.details["field"] == field
    assert bad not in str(raised.value)
    assert bad not in str(raised.value.details)
    assert await _stored(world) == 0


@pytest.mark.parametrize("bad", BAD, ids=["nul", "high", "low"])
async def test_idempotency_key_patch_and_update_refuse_unstorable_text(
    world: ServiceWorld, bad: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        await world.service.create(ALICE, f"key{bad}", definition())
    assert (raised.value.code, raised.value.details["field"]) == (
        "schedule.text.invalid",
        "idempotency_key",
    )
    made = await world.service.create(ALICE, "ok", definition())
    sid = made.schedule.id
    patches = [
        SchedulePatch(title=f"t{bad}"),
        SchedulePatch(instruction=f"i{bad}"),
        SchedulePatch(at=f"2030-01-01T00:00:00Z{bad}"),
        SchedulePatch(cadence={"kind": "DAILY", "local_time": "09:00", "timezone": f"U{bad}"}),
    ]
    for patch in patches:
        with pytest.raises(ValidationError) as raised:
            await world.service.patch(ALICE, sid, 1, patch, "p")
        assert raised.value.code == "schedule.text.invalid", patch
    with pytest.raises(ValidationError) as raised:
        await world.service.update(ALICE, sid, 1, definition(instruction=f"x{bad}"))
    assert raised.value.code == "schedule.text.invalid"
    with pytest.raises(ValidationError) as raised:
        await world.service.update(ALICE, sid, 1, definition(), idempotency_key=f"u{bad}")
    assert raised.value.code == "schedule.text.invalid"
    detail = await world.service.get(ALICE, sid)
    assert detail.schedule.current_revision == 1
