"""The closed transition table and the pure state rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.lifecycle import (
    ILLEGAL_TRANSITION,
    INVALID_EXPECTED_REVISION,
    STALE_REVISION,
    Action,
    allowed_edges,
    apply,
    decide,
)
from scheduling.domain.schedule import PauseReason, Schedule, ScheduleState

S = ScheduleState
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

SPEC_TABLE = {
    (S.ACTIVE, S.ACTIVE),
    (S.ACTIVE, S.PAUSED),
    (S.ACTIVE, S.COMPLETED),
    (S.ACTIVE, S.CANCELLED),
    (S.PAUSED, S.PAUSED),
    (S.PAUSED, S.ACTIVE),
    (S.PAUSED, S.CANCELLED),
}


def schedule(state: ScheduleState, revision: int = 3, **extra: object) -> Schedule:
    values: dict[str, object] = {
        "id": UUID(int=1),
        "tenant_id": "t",
        "principal_id": "p",
        "state": state,
        "pause_reason": PauseReason.USER if state is S.PAUSED else None,
        "current_revision": revision,
        "next_fire_at": T0 + timedelta(hours=1) if state is S.ACTIVE else None,
        "consecutive_failures": 1,
        "created_at": T0,
        "updated_at": T0,
    }
    values.update(extra)
    return Schedule(**values)


def test_the_table_is_exactly_the_specs() -> None:
    assert allowed_edges() == SPEC_TABLE


@pytest.mark.parametrize("action", list(Action))
@pytest.mark.parametrize("state", list(S))
def test_every_pair_is_a_listed_edge_a_noop_or_a_conflict(action: Action, state: S) -> None:
    illegal = state in (S.COMPLETED, S.CANCELLED) and not (
        state is S.CANCELLED and action is Action.CANCEL
    )
    illegal |= state is S.PAUSED and action in (Action.COMPLETE, Action.AUTO_PAUSE)
    if illegal:
        with pytest.raises(ConflictError) as info:
            decide(action, state, 3, 3)
        assert info.value.code == ILLEGAL_TRANSITION
        assert info.value.details["current_revision"] == 3
        return
    decision = decide(action, state, 3, 3)
    if decision.noop:
        assert decision.target is state
        assert action in (Action.PAUSE, Action.RESUME, Action.CANCEL)
    else:
        assert (decision.source, decision.target) in SPEC_TABLE


def test_terminal_states_never_reopen() -> None:
    for terminal in (S.COMPLETED, S.CANCELLED):
        for action in (Action.UPDATE, Action.PAUSE, Action.RESUME, Action.COMPLETE):
            with pytest.raises(ConflictError):
                decide(action, terminal, 1, 1)
    with pytest.raises(ConflictError):
        decide(Action.CANCEL, S.COMPLETED, 1, 1)
    assert decide(Action.CANCEL, S.CANCELLED, 1, 1).noop


def test_stale_revision_wins_over_idempotence_and_carries_the_current_revision() -> None:
    with pytest.raises(ConflictError) as info:
        decide(Action.PAUSE, S.PAUSED, 4, 3)
    assert info.value.code == STALE_REVISION
    assert info.value.details["current_revision"] == 4


@pytest.mark.parametrize("bad", [0, -1, True, "3", None, 2.0])
def test_malformed_expected_revision(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        decide(Action.PAUSE, S.ACTIVE, 3, bad)  # type: ignore[arg-type]
    assert info.value.code == INVALID_EXPECTED_REVISION


def test_apply_pause_clears_next_fire_and_keeps_the_revision() -> None:
    before = schedule(S.ACTIVE)
    after = apply(before, decide(Action.PAUSE, S.ACTIVE, 3, 3), now=T0, next_fire_at=None)
    assert (after.state, after.pause_reason, after.next_fire_at) == (
        S.PAUSED,
        PauseReason.USER,
        None,
    )
    assert after.current_revision == 3


def test_apply_resume_sets_next_fire_and_resets_failures() -> None:
    before = schedule(S.PAUSED)
    fire = T0 + timedelta(days=1)
    after = apply(before, decide(Action.RESUME, S.PAUSED, 3, 3), now=T0, next_fire_at=fire)
    assert (after.state, after.pause_reason, after.next_fire_at) == (S.ACTIVE, None, fire)
    assert after.consecutive_failures == 0


def test_update_while_paused_keeps_the_pause_reason_and_no_next_fire() -> None:
    before = schedule(S.PAUSED, pause_reason=PauseReason.FAILURE_LIMIT)
    after = apply(
        before, decide(Action.UPDATE, S.PAUSED, 3, 3), now=T0, next_fire_at=T0, revision=4
    )
    assert after.pause_reason is PauseReason.FAILURE_LIMIT
    assert after.next_fire_at is None
    assert after.current_revision == 4


def test_auto_pause_records_failure_limit_without_an_expected_revision() -> None:
    decision = decide(Action.AUTO_PAUSE, S.ACTIVE, 3, None)
    after = apply(schedule(S.ACTIVE), decision, now=T0, next_fire_at=None)
    assert after.pause_reason is PauseReason.FAILURE_LIMIT


def test_user_commands_require_an_expected_revision() -> None:
    with pytest.raises(ValidationError):
        decide(Action.CANCEL, S.ACTIVE, 3, None)
