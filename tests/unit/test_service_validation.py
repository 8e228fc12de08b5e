"""Every rule of the spec's "Validation rejects ..." paragraph, with its stable code."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
from scheduling.domain.errors import SchedulingError
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.service import SchedulePatch
from scheduling.testing import MemoryStorage
from simulation.worlds.service import (
    AGENT_ID,
    CEILINGS,
    LIMITS,
    ServiceWorld,
    build_world,
    definition,
    principal,
)

ALICE = principal("alice")
PROFILE = UUID("0d7c6f1e-0000-4000-8000-000000000001")
BOBS_PROFILE = UUID("0d7c6f1e-0000-4000-8000-000000000002")
PENDING = UUID("0d7c6f1e-0000-4000-8000-000000000003")


@pytest.fixture
def world() -> ServiceWorld:
    w = build_world(MemoryStorage(), principals=[ALICE])
    w.profiles.put(BrowserProfile(PROFILE, "tenant-a", "alice", BrowserProfileState.READY))
    w.profiles.put(BrowserProfile(BOBS_PROFILE, "tenant-a", "bob", BrowserProfileState.READY))
    w.profiles.put(BrowserProfile(PENDING, "tenant-a", "alice", BrowserProfileState.PENDING))
    return w


WEB = frozenset({"browser.profile.read"})
CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "schedule.cadence.unknown_field",
        {"cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "UTC", "every": 2}},
    ),
    ("schedule.cadence.naive_instant", {"cadence": {"kind": "ONCE", "at": "2026-05-01T09:00:00"}}),
    (
        "schedule.cadence.invalid_timezone",
        {"cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Mars/Olympus"}},
    ),
    (
        "schedule.cadence.weekday_duplicate",
        {
            "cadence": {
                "kind": "WEEKLY",
                "local_time": "09:00",
                "weekdays": [1, 1],
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.weekday_out_of_range",
        {"cadence": {"kind": "WEEKLY", "local_time": "09:00", "weekdays": [8], "timezone": "UTC"}},
    ),
    (
        "schedule.cadence.day_duplicate",
        {
            "cadence": {
                "kind": "MONTHLY",
                "local_time": "09:00",
                "days_of_month": [3, 3],
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.day_out_of_range",
        {
            "cadence": {
                "kind": "MONTHLY",
                "local_time": "09:00",
                "days_of_month": [32],
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.monthly_selector_empty",
        {
            "cadence": {
                "kind": "MONTHLY",
                "local_time": "09:00",
                "days_of_month": [],
                "last_day": False,
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.yearly_date_duplicate",
        {
            "cadence": {
                "kind": "YEARLY",
                "local_time": "09:00",
                "dates": [{"month": 1, "day": 2}, {"month": 1, "day": 2}],
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.yearly_date_impossible",
        {
            "cadence": {
                "kind": "YEARLY",
                "local_time": "09:00",
                "dates": [{"month": 4, "day": 31}],
                "timezone": "UTC",
            }
        },
    ),
    (
        "schedule.cadence.yearly_selector_empty",
        {"cadence": {"kind": "YEARLY", "local_time": "09:00", "dates": [], "timezone": "UTC"}},
    ),
    ("schedule.revision.non_positive_timeout", {"run_timeout_seconds": 0}),
    ("schedule.revision.missing_field", {"run_timeout_seconds": None}),
    ("schedule.revision.missing_field", {"misfire_grace_seconds": None}),
    ("schedule.revision.non_positive_grace", {"misfire_grace_seconds": -5}),
    (
        "schedule.limits.non_positive_bound",
        {"limits": {"max_steps": 0, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "1"}},
    ),
    (
        "schedule.limits.non_positive_bound",
        {"limits": {"max_steps": 1, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "0"}},
    ),
    (
        "schedule.limits.missing_field",
        {"limits": {"max_steps": 1, "max_model_calls": 1, "max_cost": "1"}},
    ),
    ("schedule.validation.ceiling_exceeded", {"run_timeout_seconds": 3601}),
    ("schedule.validation.ceiling_exceeded", {"misfire_grace_seconds": 7201}),
    (
        "schedule.validation.ceiling_exceeded",
        {"limits": LIMITS.model_copy(update={"max_cost": Decimal("10.01")})},
    ),
    ("schedule.validation.unknown_scope", {"requested_scopes": frozenset({"admin.everything"})}),
    ("schedule.validation.scope_not_held", {"requested_scopes": frozenset({"run.cancel"})}),
    ("schedule.validation.agent_version_unknown", {"agent_version": "v9"}),
    ("schedule.validation.agent_unknown", {"agent_id": UUID(int=7), "agent_version": None}),
    ("schedule.validation.policy_mismatch", {"policy_profile": "permissive"}),
    ("schedule.validation.browser_scope_required", {"browser_profile_id": PROFILE}),
    (
        "schedule.validation.browser_profile_unavailable",
        {"browser_profile_id": BOBS_PROFILE, "requested_scopes": WEB},
    ),
    (
        "schedule.validation.browser_profile_unavailable",
        {"browser_profile_id": UUID(int=9), "requested_scopes": WEB},
    ),
    (
        "schedule.validation.browser_profile_not_ready",
        {"browser_profile_id": PENDING, "requested_scopes": WEB},
    ),
    (
        "schedule.validation.no_future_occurrence",
        {"cadence": {"kind": "ONCE", "at": "2026-03-01T09:00:00Z"}},
    ),
    (
        "schedule.secret_detected",
        {
            "instruction": "Use Authorization: Bearer eyJhbGciOiJIUzI1NiJ9"
            ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
            ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U to call the API"
        },
    ),
    ("schedule.secret_detected", {"title": "key AKIAIOSFODNN7EXAMPLE"}),
]


@pytest.mark.parametrize(
    ("code", "override"), CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)]
)
async def test_invalid_definition_is_rejected_with_its_code_and_nothing_is_stored(
    world: ServiceWorld, code: str, override: dict[str, Any]
) -> None:
    with pytest.raises(SchedulingError) as info:
        await world.service.create(ALICE, "key", definition(**override))
    assert info.value.code == code
    store = world.uow.store  # type: ignore[attr-defined]
    assert not store.tables.schedules
    assert not store.tables.idempotency


async def test_a_valid_website_binding_is_accepted(world: ServiceWorld) -> None:
    result = await world.service.create(
        ALICE,
        "k",
        definition(browser_profile_id=PROFILE, requested_scopes=WEB | {"memory.read"}),
    )
    detail = await world.service.get(ALICE, result.schedule.id)
    assert detail.revision.browser_profile_id == PROFILE


async def test_unbound_definitions_keep_their_hash() -> None:
    from scheduling.service.validation import normalized_request

    assert "browser_profile_id" not in normalized_request(definition())


async def test_active_agent_version_is_pinned_when_omitted(world: ServiceWorld) -> None:
    result = await world.service.create(
        ALICE, "k", definition(agent_version=None, policy_profile=None)
    )
    detail = await world.service.get(ALICE, result.schedule.id)
    assert (detail.revision.agent_id, detail.revision.agent_version) == (AGENT_ID, "v1")


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({}, "schedule.patch.empty"),
        (
            {"at": "2026-04-01T00:00:00Z", "cadence": {"kind": "DAILY"}},
            "schedule.patch.at_and_cadence",
        ),
    ],
)
def test_malformed_patch(fields: dict[str, Any], code: str) -> None:
    with pytest.raises(SchedulingError) as info:
        SchedulePatch(**fields)
    assert info.value.code == code


async def test_secret_in_patch_writes_no_revision(world: ServiceWorld) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    with pytest.raises(SchedulingError) as info:
        await world.service.patch(
            ALICE,
            s.id,
            1,
            SchedulePatch(instruction="password=hunter2hunter2 for https://u:p4ssw0rd@example.com"),
            "p",
        )
    assert info.value.code == "schedule.secret_detected"
    assert (await world.service.get(ALICE, s.id)).schedule.current_revision == 1


async def test_disabled_principal_cannot_create(world: ServiceWorld) -> None:
    assert world.static_principals is not None
    world.static_principals.set("tenant-a", "alice", ALICE.scopes, enabled=False)
    with pytest.raises(SchedulingError) as info:
        await world.service.create(ALICE, "k", definition())
    assert info.value.code == "schedule.auth.principal_unavailable"


def test_tenant_ceilings_must_be_finite_and_positive() -> None:
    from scheduling.domain.tenancy import NON_POSITIVE_CEILING, TenantCeilings

    for field, bad in (("max_active_runs", 0), ("max_daily_cost", "Infinity"), ("max_steps", -1)):
        with pytest.raises(SchedulingError) as info:
            TenantCeilings(**{**CEILINGS.model_dump(), field: bad})
        assert info.value.code == NON_POSITIVE_CEILING


async def test_an_unconfigured_tenant_cannot_schedule() -> None:
    outsider = principal("carol", tenant_id="tenant-z")
    world = build_world(
        MemoryStorage(),
        principals=[outsider],
        tenants=ConfiguredTenantConfiguration({"tenant-a": CEILINGS}),
    )
    with pytest.raises(SchedulingError) as info:
        await world.service.create(outsider, "k", definition())
    assert info.value.code == "schedule.tenancy.not_configured"
