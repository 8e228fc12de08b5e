"""Revisions pin the owner's authority version (ADR 1200): the field, the validator
that pins it, the service paths that write it, and the materializer's comparison rule.

The service runs over the in-memory adapters here (application rules); the same paths
on PostgreSQL are in ``tests/integration/test_authority_pinning.py`` and the gate
check ``src/gates/checks/test_authority_fresh.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.canonical import canonical_json
from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.directories import AuthoritySnapshot
from scheduling.service import SchedulePatch
from scheduling.service.materializer import (
    AUTHORITY_CHANGED,
    PRINCIPAL_DISABLED,
    PRINCIPAL_MISSING,
    SCOPE_REVOKED,
    ScheduleMaterializer,
)
from scheduling.service.validation import normalized_request
from scheduling.testing import MemoryStorage
from simulation.worlds.service import (
    ALL_SCOPES,
    LIMITS,
    ServiceWorld,
    build_world,
    definition,
    principal,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = principal("alice")


def revision(**changes: Any) -> ScheduleRevision:
    data: dict[str, Any] = {
        "schedule_id": UUID(int=1),
        "revision": 1,
        "title": "Digest",
        "instruction": "Summarize.",
        "agent_id": UUID(int=2),
        "agent_version": "v1",
        "policy_profile": "default",
        "requested_scopes": frozenset({"memory.read"}),
        "limits": LIMITS,
        "run_timeout_seconds": 300,
        "cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"},
        "misfire_grace_seconds": 3600,
        "max_consecutive_failures": 2,
        "created_by_principal_id": "alice",
        "created_at": T0,
    }
    data.update(changes)
    return ScheduleRevision(**data)


def snapshot(
    version: str, scopes: frozenset[str] = frozenset({"memory.read"})
) -> AuthoritySnapshot:
    return AuthoritySnapshot("tenant-a", "alice", True, scopes, version)


# ------------------------------------------------------------------ the field


def test_pinned_version_round_trips_through_the_stored_definition() -> None:
    value = revision(authority_version="sha256:abc")
    stored = json.loads(canonical_json(value.to_definition()))
    assert stored["authority_version"] == "sha256:abc"
    again = ScheduleRevision.from_definition(UUID(int=1), 1, "alice", T0, stored)
    assert again == value
    assert again.authority_version == "sha256:abc"


def test_a_definition_stored_before_pinning_decodes_unpinned_and_re_encodes_identically() -> None:
    old = revision().to_definition()
    assert "authority_version" not in old
    decoded = ScheduleRevision.from_definition(UUID(int=1), 1, "alice", T0, old)
    assert decoded.authority_version is None
    assert decoded.to_definition() == old


def test_the_pin_is_a_strict_string_or_none() -> None:
    from scheduling.domain.errors import ValidationError

    with pytest.raises(ValidationError):
        revision(authority_version=7)


# ------------------------------------------------------------------ the firing rule

RULE = ScheduleMaterializer._authorization


@pytest.mark.parametrize(
    ("pinned", "current", "expected"),
    [
        (None, snapshot("v2"), None),  # unpinned revisions keep the scope-only rule
        ("v1", snapshot("v1"), None),
        ("v1", snapshot("v2"), AUTHORITY_CHANGED),
        ("v1", snapshot("v2", frozenset()), SCOPE_REVOKED),  # the specific reason first
        ("v1", None, PRINCIPAL_MISSING),
        (
            "v1",
            AuthoritySnapshot("tenant-a", "alice", False, frozenset({"memory.read"}), "v2"),
            PRINCIPAL_DISABLED,
        ),
    ],
)
def test_firing_rule(pinned: str | None, current: AuthoritySnapshot | None, expected: str) -> None:
    assert RULE(current, revision(authority_version=pinned)) == expected


# ------------------------------------------------------------------ the service pins


@pytest.fixture
def world() -> ServiceWorld:
    return build_world(MemoryStorage(), principals=[ALICE])


async def current_version(world: ServiceWorld) -> str:
    snap = await world.principals.current(ALICE.tenant_id, ALICE.principal_id)
    assert snap is not None
    return snap.authority_version


def grant_role(world: ServiceWorld, role: str) -> None:
    """Same scopes, new non-secret authority inputs: a version-only change."""
    assert world.static_principals is not None
    world.static_principals.set(
        ALICE.tenant_id, ALICE.principal_id, ALL_SCOPES, authority_inputs={"roles": [role]}
    )


def restore(world: ServiceWorld) -> None:
    assert world.static_principals is not None
    world.static_principals.set(ALICE.tenant_id, ALICE.principal_id, ALL_SCOPES)


async def pinned(world: ServiceWorld, schedule_id: UUID) -> str | None:
    return (await world.service.get(ALICE, schedule_id)).revision.authority_version


async def test_create_update_and_patch_pin_the_callers_current_version(world: ServiceWorld) -> None:
    v1 = await current_version(world)
    s = (await world.service.create(ALICE, "k", definition())).schedule
    assert await pinned(world, s.id) == v1
    grant_role(world, "auditor")
    v2 = await current_version(world)
    assert v2 != v1
    updated = await world.service.update(ALICE, s.id, 1, definition(title="Updated"))
    assert updated.schedule.current_revision == 2
    assert await pinned(world, s.id) == v2
    grant_role(world, "editor")
    v3 = await current_version(world)
    patched = await world.service.patch(ALICE, s.id, 2, SchedulePatch(title="Patched"), "p1")
    assert patched.schedule.current_revision == 3
    assert await pinned(world, s.id) == v3


async def test_an_unchanged_patch_under_unchanged_authority_writes_nothing(
    world: ServiceWorld,
) -> None:
    s = (await world.service.create(ALICE, "k", definition())).schedule
    same = await world.service.patch(
        ALICE, s.id, 1, SchedulePatch(title=definition().title), "same"
    )
    assert not same.changed
    assert same.schedule.current_revision == 1
    # The key was recorded: the identical request replays.
    again = await world.service.patch(
        ALICE, s.id, 1, SchedulePatch(title=definition().title), "same"
    )
    assert again.replayed


async def test_an_identical_definition_under_changed_authority_re_pins(world: ServiceWorld) -> None:
    # ADR 1200: the pinned version is part of the normalized definition, so the owner
    # re-approving the same content under new authority writes revision N+1.
    s = (await world.service.create(ALICE, "k", definition())).schedule
    v1 = await current_version(world)
    grant_role(world, "auditor")
    v2 = await current_version(world)
    same = await world.service.patch(
        ALICE, s.id, 1, SchedulePatch(title=definition().title), "re-approve"
    )
    assert same.changed
    assert same.schedule.current_revision == 2
    assert await pinned(world, s.id) == v2 != v1
    # ... and once re-pinned, the same patch again is unchanged.
    again = await world.service.patch(
        ALICE, s.id, 2, SchedulePatch(title=definition().title), "again"
    )
    assert not again.changed
    assert again.schedule.current_revision == 2


async def test_create_idempotency_hashes_the_request_not_the_pin(world: ServiceWorld) -> None:
    assert "authority_version" not in normalized_request(definition())
    first = await world.service.create(ALICE, "k", definition())
    grant_role(world, "auditor")
    replay = await world.service.create(ALICE, "k", definition())
    assert replay.replayed
    assert replay.schedule.id == first.schedule.id
    assert replay.schedule.current_revision == 1
    restore(world)
    assert await pinned(world, first.schedule.id) == await current_version(world)
