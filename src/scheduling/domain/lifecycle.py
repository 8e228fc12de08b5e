"""The closed schedule transition table and the pure state rules (spec "State transitions").

``decide(action, state, current_revision, expected_revision)`` says what one lifecycle
command does to a schedule, without I/O:

* a stale ``expected_revision`` is a conflict that carries the current revision and
  changes nothing (checked first, so a stale retry never looks like a success);
* pause, resume and cancel repeated against the state they already reached are
  idempotent (``Decision.noop``): no write and no event;
* any other pair outside the table (every transition out of COMPLETED or CANCELLED,
  cancel of a COMPLETED schedule, ...) is a conflict carrying the current revision.

The materializer's own transitions (one-time completion, failure-limit auto-pause) are
in the same table so no code path can invent a transition the spec does not list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.schedule import PauseReason, Schedule, ScheduleState

STALE_REVISION = reason(
    "schedule.lifecycle.stale_revision",
    "expected_revision is not the schedule's current revision; nothing changed",
)
ILLEGAL_TRANSITION = reason(
    "schedule.lifecycle.illegal_transition",
    "The transition is not in the closed table (e.g. out of a terminal state)",
)
INVALID_EXPECTED_REVISION = reason(
    "schedule.lifecycle.invalid_expected_revision", "expected_revision is not a positive integer"
)

_S = ScheduleState


class Action(StrEnum):
    """Every command that may change a schedule's state."""

    UPDATE = "update"
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    COMPLETE = "complete"
    AUTO_PAUSE = "auto_pause"


# The closed table of the spec, keyed by (action, from-state) -> to-state.
TRANSITIONS: dict[tuple[Action, ScheduleState], ScheduleState] = {
    (Action.UPDATE, _S.ACTIVE): _S.ACTIVE,
    (Action.UPDATE, _S.PAUSED): _S.PAUSED,
    (Action.PAUSE, _S.ACTIVE): _S.PAUSED,
    (Action.AUTO_PAUSE, _S.ACTIVE): _S.PAUSED,
    (Action.COMPLETE, _S.ACTIVE): _S.COMPLETED,
    (Action.CANCEL, _S.ACTIVE): _S.CANCELLED,
    (Action.CANCEL, _S.PAUSED): _S.CANCELLED,
    (Action.RESUME, _S.PAUSED): _S.ACTIVE,
}

# The state each idempotent command reaches; repeating it there is a no-op.
REACHED: dict[Action, ScheduleState] = {
    Action.PAUSE: _S.PAUSED,
    Action.RESUME: _S.ACTIVE,
    Action.CANCEL: _S.CANCELLED,
}

# The pause_reason a transition writes into a PAUSED target.
PAUSE_REASONS: dict[Action, PauseReason] = {
    Action.PAUSE: PauseReason.USER,
    Action.AUTO_PAUSE: PauseReason.FAILURE_LIMIT,
}


def allowed_edges() -> frozenset[tuple[ScheduleState, ScheduleState]]:
    """The spec's table as (from, to) pairs; nothing else is a legal state change."""
    return frozenset((src, dst) for (_, src), dst in TRANSITIONS.items())


@dataclass(frozen=True)
class Decision:
    """What a command does: move to ``target`` or, when ``noop``, write nothing."""

    action: Action
    source: ScheduleState
    target: ScheduleState
    noop: bool
    pause_reason: PauseReason | None


def check_expected_revision(expected_revision: object, current_revision: int) -> None:
    """Raise unless ``expected_revision`` is a positive int equal to the current one."""
    if (
        isinstance(expected_revision, bool)
        or not isinstance(expected_revision, int)
        or expected_revision < 1
    ):
        raise ValidationError(
            INVALID_EXPECTED_REVISION, "expected_revision must be a positive integer"
        )
    if expected_revision != current_revision:
        raise ConflictError(
            STALE_REVISION,
            "the schedule changed since it was read",
            {"current_revision": current_revision, "expected_revision": expected_revision},
        )


def decide(
    action: Action,
    state: ScheduleState,
    current_revision: int,
    expected_revision: int | None,
) -> Decision:
    """The decision for ``action`` on a schedule in ``state`` (see the module docstring).

    ``expected_revision`` is None only for the scheduler's own transitions (COMPLETE,
    AUTO_PAUSE), which act on the row they have locked.
    """
    if expected_revision is not None or action not in (Action.COMPLETE, Action.AUTO_PAUSE):
        check_expected_revision(expected_revision, current_revision)
    if REACHED.get(action) is state:
        return Decision(action, state, state, noop=True, pause_reason=None)
    target = TRANSITIONS.get((action, state))
    if target is None:
        raise ConflictError(
            ILLEGAL_TRANSITION,
            f"cannot {action.value} a {state.value} schedule",
            {"current_revision": current_revision, "state": state.value},
        )
    pause_reason = PAUSE_REASONS.get(action) if target is _S.PAUSED else None
    return Decision(action, state, target, noop=False, pause_reason=pause_reason)


def apply(
    schedule: Schedule,
    decision: Decision,
    *,
    now: datetime,
    next_fire_at: datetime | None,
    revision: int | None = None,
) -> Schedule:
    """The schedule after a non-noop ``decision`` (validated; never a partial state).

    ``next_fire_at`` is the caller's recurrence result for an ACTIVE target and is
    dropped for every other target (paused and terminal schedules never fire). An
    update keeps the existing pause_reason; resume starts a fresh failure count.
    """
    if decision.noop:
        return schedule
    target = decision.target
    keep = decision.pause_reason or schedule.pause_reason
    pause_reason = keep if target is _S.PAUSED else None
    failures = 0 if decision.action is Action.RESUME else schedule.consecutive_failures
    return schedule.model_copy(
        update={
            "state": target,
            "pause_reason": pause_reason,
            "next_fire_at": next_fire_at if target is _S.ACTIVE else None,
            "current_revision": revision if revision is not None else schedule.current_revision,
            "consecutive_failures": failures,
            "updated_at": max(now, schedule.updated_at),
        }
    )
