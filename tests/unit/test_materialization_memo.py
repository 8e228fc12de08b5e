"""The decision store's memos (ADR 2580): a hit returns exactly what the call would
have built, and a row whose values differ, even only in a JSON type, misses."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from scheduling.adapters.postgres import materialization as m
from scheduling.adapters.postgres import memo as memos
from scheduling.domain.canonical import canonical_json
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.ports.directories import authority_version

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIMITS = {"max_steps": 10, "max_model_calls": 5, "max_tool_calls": 5, "max_cost": "1.50"}


@pytest.fixture
def valid_definition() -> dict[str, Any]:
    """A stored definition as the database returns it (decoded canonical JSON)."""
    value = ScheduleRevision(
        schedule_id=UUID(int=7),
        revision=1,
        title="Digest",
        instruction="Summarize.",
        agent_id=UUID(int=7),
        agent_version="v1",
        policy_profile="default",
        requested_scopes=frozenset({"memory.read"}),
        limits=LIMITS,
        run_timeout_seconds=300,
        cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
        misfire_grace_seconds=3600,
        max_consecutive_failures=2,
        created_by_principal_id="p-memo",
        created_at=T0,
    )
    stored: dict[str, Any] = json.loads(canonical_json(value.to_definition()))
    return stored


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (0, False),
        (0.0, -0.0),
        ({"a": 1}, {"a": 1.0}),
        ({"a": [1, 2]}, {"a": [1, True]}),
        ({"a": 1}, {"a": 1, "b": None}),
        ([1], [1, 1]),
        ({"a": None}, {}),
        ("1", 1),
    ],
)
def test_values_that_compare_equal_but_encode_differently_are_not_the_same(a: Any, b: Any) -> None:
    assert not memos.same(a, b)
    assert not memos.same(b, a)


@pytest.mark.parametrize(
    "value",
    [None, True, 0, 1.5, "x", [], {}, {"a": [1, {"b": "c"}], "d": 2.5, "e": None}],
)
def test_equal_values_of_equal_types_are_the_same(value: Any) -> None:
    import copy

    assert memos.same(value, copy.deepcopy(value))


def test_memo_hits_only_on_the_same_inputs_and_clears_when_full() -> None:
    memo = memos.Memo(2)
    memo.put("k", {"a": 1}, "one")
    assert memo.get("k", {"a": 1}) == "one"
    assert memo.get("k", {"a": True}) is None
    assert memo.get("other", {"a": 1}) is None
    memo.put("k2", {}, "two")
    memo.put("k3", {}, "three")  # full: cleared first
    assert memo.get("k", {"a": 1}) is None
    assert memo.get("k3", {}) == "three"


def _schedule() -> Any:
    # Only the fields the memo keys read.
    class _S:
        id = UUID(int=11)
        tenant_id = "t-memo"
        principal_id = "p-memo"
        current_revision = 1

    return _S()


def test_authority_version_is_the_uncached_one_and_follows_a_type_change() -> None:
    schedule = _schedule()
    scopes = frozenset({"a", "b"})
    for inputs in ({"roles": ["x"], "n": 1}, {"roles": ["x"], "n": True}, {"roles": ["x"], "n": 1}):
        for _ in range(2):
            got = m._authority_version(schedule, True, scopes, inputs)
            assert got == authority_version("t-memo", "p-memo", True, scopes, inputs)
    assert m._authority_version(schedule, False, scopes, {"n": 1}) == authority_version(
        "t-memo", "p-memo", False, scopes, {"n": 1}
    )


def test_agent_limits_are_revalidated_when_the_stored_limits_change() -> None:
    class _R:
        agent_id = UUID(int=12)
        agent_version = "v1"

    revision: Any = _R()
    first = dict(LIMITS)
    assert m._agent_limits(revision, first) == RunLimits.model_validate(first)
    assert m._agent_limits(revision, dict(first)) is m._agent_limits(revision, first)
    changed = {**LIMITS, "max_cost": "3"}
    assert m._agent_limits(revision, changed) == RunLimits.model_validate(changed)


def test_a_revision_is_rebuilt_when_its_stored_definition_differs(
    valid_definition: dict[str, Any],
) -> None:
    schedule = _schedule()
    at = T0
    row: Any = {
        "r_definition": valid_definition,
        "r_created_by_principal_id": "p-memo",
        "r_created_at": at,
    }
    first = m._revision(schedule, row)
    assert m._revision(schedule, dict(row)) is first
    retitled = {**valid_definition, "title": valid_definition["title"] + " (2)"}
    again = m._revision(schedule, {**row, "r_definition": retitled})
    assert again.title == retitled["title"]
    assert again.schedule_id == schedule.id
    assert again.created_at == at
    # The rebuilt revision equals the uncached one.
    assert again == ScheduleRevision.from_definition(schedule.id, 1, "p-memo", at, retitled)
    assert first == ScheduleRevision.from_definition(schedule.id, 1, "p-memo", at, valid_definition)
