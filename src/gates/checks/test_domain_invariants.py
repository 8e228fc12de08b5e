"""gate.schedule.domain_invariants: generated schedule, revision and occurrence inputs
either construct a complete legal value or fail with a stable, registered validation
code - never a partial value, never a raw pydantic or other exception.

Each field is drawn from labelled good and bad values; an independent predicate,
written from the spec's rules (not from the model code), says whether the whole input
is legal. The model must agree with it on every example.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.checks.recurrence_support import reproduction
from gates.pytest_plugin import GateEvidence
from scheduling.domain.errors import ValidationError
from scheduling.domain.occurrence import OccurrenceDisposition, ScheduleOccurrence
from scheduling.domain.reasons import all_reasons
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.schedule import Schedule, ScheduleState

GATE = "gate.schedule.domain_invariants"
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
NAIVE = datetime(2026, 1, 1, 12)  # noqa: DTZ001 - a deliberately naive input
PLUS2 = datetime(2026, 1, 1, 14, tzinfo=timezone(timedelta(hours=2)))  # == T0
ABSENT = object()


def field(good: list[Any], bad: list[Any]) -> st.SearchStrategy[tuple[Any, bool]]:
    """A value and whether it is acceptable on its own (bad about one time in eight, so
    whole inputs are often legal and often wrong in exactly one place)."""
    good_values = st.sampled_from([(v, True) for v in good])
    bad_values = st.sampled_from([(v, False) for v in bad])
    return st.integers(0, 7).flatmap(lambda i: bad_values if i == 7 else good_values)


def inputs(fields: dict[str, st.SearchStrategy[tuple[Any, bool]]]) -> Any:
    """Draw every field (sometimes dropping one or adding an unknown one)."""

    @st.composite
    def draw_all(draw: Any) -> tuple[dict[str, Any], dict[str, bool], bool]:
        data: dict[str, Any] = {}
        ok: dict[str, bool] = {}
        for name, strategy in fields.items():
            value, good = draw(strategy)
            if value is not ABSENT:
                data[name] = value
            ok[name] = good
        shape_ok = True
        if draw(st.integers(0, 9)) == 0:
            data["token"] = "x"  # unknown field (and a credential-shaped one)
            shape_ok = False
        return data, ok, shape_ok

    return draw_all()


def _check(
    model: Callable[..., Any],
    data: dict[str, Any],
    expected_ok: bool,
    outcomes: dict[str, int],
    registered: dict[str, str],
) -> Any:
    error: ValidationError | None = None
    try:
        value = model(**data)
    except ValidationError as exc:
        error = exc
    if error is not None:
        assert error.code in registered, f"unregistered code {error.code}"
        assert not expected_ok, f"legal input rejected with {error.code}: {data}"
        outcomes[error.code] = outcomes.get(error.code, 0) + 1
        return None
    assert expected_ok, f"illegal input accepted: {data}"
    outcomes["constructed"] = outcomes.get("constructed", 0) + 1
    return value


def _aware_utc(*values: datetime | None) -> bool:
    return all(v is None or (v.utcoffset() == timedelta(0) and v.tzinfo is UTC) for v in values)


# ------------------------------------------------------------------------ schedule

SCHEDULE_FIELDS = {
    "id": field([UUID(int=1)], ["not-a-uuid", ABSENT]),
    "tenant_id": field(["tenant-a"], ["", "  ", 7, ABSENT]),
    "principal_id": field(["user-1"], ["", None]),
    "state": field([s.value for s in ScheduleState], ["RUNNING", None]),
    "pause_reason": field([None, "user", "failure_limit"], ["bored", 1]),
    "current_revision": field([1, 7], [0, -1, True, "1", ABSENT]),
    "next_fire_at": field([None, T0, PLUS2], [NAIVE, "soon"]),
    "consecutive_failures": field([0, 3], [-1, 1.5]),
    "created_at": field([T0], [NAIVE, ABSENT]),
    "updated_at": field([T0, T0 + timedelta(hours=1), T0 - timedelta(hours=1)], [NAIVE]),
}


def schedule_is_legal(data: dict[str, Any], ok: dict[str, bool]) -> bool:
    if not all(ok.values()):
        return False
    if (data["state"] == "PAUSED") != (data["pause_reason"] is not None):
        return False
    if data["next_fire_at"] is not None and data["state"] != "ACTIVE":
        return False
    return bool(data["updated_at"] >= data["created_at"])


# ------------------------------------------------------------------------ revision

GOOD_LIMITS = {"max_steps": 10, "max_model_calls": 5, "max_tool_calls": 5, "max_cost": "2.50"}
LIMITS_VALUES = field(
    [GOOD_LIMITS, {**GOOD_LIMITS, "reserve_steps": 2, "reserve_cost": "1"}],
    [
        {**GOOD_LIMITS, "max_steps": 0},
        {**GOOD_LIMITS, "max_tool_calls": -3},
        {**GOOD_LIMITS, "max_cost": "0"},
        {**GOOD_LIMITS, "max_cost": "Infinity"},
        {**GOOD_LIMITS, "max_cost": "NaN"},
        {k: v for k, v in GOOD_LIMITS.items() if k != "max_model_calls"},
        {**GOOD_LIMITS, "reserve_steps": 10},
        {**GOOD_LIMITS, "reserve_cost": "-1"},
        {**GOOD_LIMITS, "max_steps": True},
    ],
)
DAILY = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}
ONCE = {"kind": "ONCE", "at": "2026-03-08T02:30:00-05:00"}
CADENCES = field(
    [(DAILY, "Europe/Paris"), (ONCE, None)],
    [
        ({"kind": "DAILY", "local_time": "25:00", "timezone": "Europe/Paris"}, "Europe/Paris"),
        ({"kind": "ONCE", "at": "2026-03-08T02:30:00"}, None),
        ({"kind": "CRON", "expr": "* * * * *"}, None),
    ],
)

REVISION_FIELDS = {
    "schedule_id": field([UUID(int=1)], ["x"]),
    "revision": field([1, 2], [0, "2"]),
    "title": field(["Morning digest"], ["", "   ", "t" * 201]),
    "instruction": field(["Summarize the news."], ["", ABSENT]),
    "agent_id": field([UUID(int=2)], [None]),
    "agent_version": field(["2026.11.1"], [""]),
    "policy_profile": field(["default"], [" "]),
    "requested_scopes": field(
        [frozenset(), frozenset({"browser.profile.read"})], [frozenset({"a b"}), frozenset({""})]
    ),
    "limits": LIMITS_VALUES,
    "run_timeout_seconds": field([300], [0, -5, 1.5]),
    "misfire_grace_seconds": field([3600], [0, -1]),
    "max_consecutive_failures": field([2], [0]),
    "created_by_principal_id": field(["user-1"], [""]),
    "created_at": field([T0, PLUS2], [NAIVE]),
}


@st.composite
def revision_inputs(draw: Any) -> tuple[dict[str, Any], bool]:
    data, ok, shape_ok = draw(inputs(REVISION_FIELDS))
    (cadence, zone), cadence_ok = draw(CADENCES)
    data["cadence"] = cadence
    mode = draw(st.sampled_from(["omit", "match", "mismatch"]))
    legal = all(ok.values()) and shape_ok and cadence_ok
    if mode == "match":
        data["timezone"] = zone
    elif mode == "mismatch":
        data["timezone"] = "UTC" if zone != "UTC" else None
        legal = False
    return data, legal


# ---------------------------------------------------------------------- occurrence

D = OccurrenceDisposition


_FORMS: dict[str, dict[str, Any]] = {
    "linked": {
        "disposition": "MATERIALIZED",
        "session_id": UUID(int=3),
        "run_id": UUID(int=4),
        "reason_code": None,
        "authority_version": "v7",
        "materialized_at": T0,
        "links_erased_at": None,
    },
    "erased": {
        "disposition": "MATERIALIZED",
        "session_id": None,
        "run_id": None,
        "reason_code": None,
        "authority_version": "v7",
        "materialized_at": T0 + timedelta(seconds=5),
        "links_erased_at": T0 + timedelta(days=1),
    },
    "decided": {
        "session_id": None,
        "run_id": None,
        "reason_code": "schedule.misfire.outside_grace",
        "authority_version": None,
        "materialized_at": None,
        "links_erased_at": None,
    },
}
_DEFECTS: list[tuple[str, Any]] = [
    ("session_id", None),
    ("session_id", UUID(int=3)),
    ("run_id", None),
    ("run_id", UUID(int=4)),
    ("links_erased_at", None),
    ("links_erased_at", T0),
    ("materialized_at", None),
    ("materialized_at", T0 - timedelta(seconds=1)),
    ("materialized_at", T0),
    ("authority_version", None),
    ("authority_version", ""),
    ("reason_code", None),
    ("reason_code", "not a code"),
    ("reason_code", "schedule.misfire.outside_grace"),
    ("nominal_fire_at", NAIVE),
    ("schedule_revision", 0),
]


def occurrence_is_legal(data: dict[str, Any]) -> bool:
    """The spec's nullable-field rules, restated independently of the model."""
    if data["nominal_fire_at"].tzinfo is None or data["schedule_revision"] != 1:
        return False
    session, run, erased = data["session_id"], data["run_id"], data["links_erased_at"]
    materialized, reason_code = data["materialized_at"], data["reason_code"]
    if data["disposition"] == "MATERIALIZED":
        linked = session is not None and run is not None and erased is None
        erased_form = session is None and run is None and erased is not None
        return bool(
            (linked or erased_form)
            and materialized is not None
            and materialized >= data["nominal_fire_at"]
            and data["authority_version"]
            and reason_code is None
        )
    return (
        session is None
        and run is None
        and erased is None
        and materialized is None
        and reason_code == "schedule.misfire.outside_grace"
    )


@st.composite
def occurrence_inputs(draw: Any) -> tuple[dict[str, Any], bool]:
    form = draw(st.sampled_from(sorted(_FORMS)))
    data: dict[str, Any] = {
        "id": UUID(int=9),
        "schedule_id": UUID(int=1),
        "schedule_revision": 1,
        "nominal_fire_at": draw(st.sampled_from([T0, PLUS2])),
        "created_at": T0,
        **_FORMS[form],
    }
    if form == "decided":
        data["disposition"] = draw(st.sampled_from([d.value for d in D if d is not D.MATERIALIZED]))
    for _ in range(draw(st.integers(0, 2))):
        name, value = draw(st.sampled_from(_DEFECTS))
        data[name] = value
    return data, occurrence_is_legal(data)


@pytest.mark.gate(GATE)
def test_values_are_complete_or_rejected_with_a_stable_code(gate_evidence: GateEvidence) -> None:
    registered = all_reasons()
    outcomes: dict[str, dict[str, int]] = {"schedule": {}, "revision": {}, "occurrence": {}}

    @given(inputs(SCHEDULE_FIELDS))
    def schedules(case: tuple[dict[str, Any], dict[str, bool], bool]) -> None:
        data, ok, shape_ok = case
        legal = shape_ok and schedule_is_legal(data, ok)
        value = _check(Schedule, data, legal, outcomes["schedule"], registered)
        if value is not None:
            assert _aware_utc(value.next_fire_at, value.created_at, value.updated_at)
            assert (value.state is ScheduleState.PAUSED) == (value.pause_reason is not None)
            assert Schedule.model_validate(value.model_dump()) == value

    @given(revision_inputs())
    def revisions(case: tuple[dict[str, Any], bool]) -> None:
        data, legal = case
        value = _check(ScheduleRevision, data, legal, outcomes["revision"], registered)
        if value is not None:
            assert value.timezone == value.cadence_value.timezone
            assert isinstance(value.limits, RunLimits)
            assert value.limits.max_cost > Decimal(0)
            assert _aware_utc(value.created_at)
            again = ScheduleRevision.from_definition(
                value.schedule_id,
                value.revision,
                value.created_by_principal_id,
                value.created_at,
                value.to_definition(),
            )
            assert again == value
            assert again.to_definition() == value.to_definition()

    @given(occurrence_inputs())
    def occurrences(case: tuple[dict[str, Any], bool]) -> None:
        data, legal = case
        value = _check(ScheduleOccurrence, data, legal, outcomes["occurrence"], registered)
        if value is not None:
            assert _aware_utc(value.nominal_fire_at, value.materialized_at, value.created_at)

    schedules()
    revisions()
    occurrences()
    gate_evidence.record("outcomes", outcomes)
    gate_evidence.record("reproduction", reproduction())
    for kind, seen in outcomes.items():
        if not seen.get("constructed") or len(seen) < 2:
            gate_evidence.not_covered(f"{kind}: generation never both constructed and rejected")


@pytest.mark.gate(GATE)
def test_copies_cannot_smuggle_an_illegal_state(gate_evidence: GateEvidence) -> None:
    """model_copy(update=...) re-validates: no route around the invariants."""
    schedule = Schedule(
        id=UUID(int=1),
        tenant_id="t",
        principal_id="p",
        state="ACTIVE",
        pause_reason=None,
        current_revision=1,
        next_fire_at=T0,
        consecutive_failures=0,
        created_at=T0,
        updated_at=T0,
    )
    with pytest.raises(ValidationError) as caught:
        schedule.model_copy(update={"state": ScheduleState.PAUSED})
    assert caught.value.code == "schedule.state.pause_reason_required"
    paused = schedule.model_copy(
        update={"state": ScheduleState.PAUSED, "pause_reason": "user", "next_fire_at": None}
    )
    assert paused.pause_reason == "user"
    with pytest.raises(ValidationError):
        Schedule.model_validate({**schedule.model_dump(), "state": "PAUSED"})
    gate_evidence.record("copy_revalidates", True)
