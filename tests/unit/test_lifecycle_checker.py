"""The lifecycle gate's checker: it accepts legal concurrent histories and rejects
non-linearizable ones (a reopened cancellation, a backfilled resume, a lost update)."""

from __future__ import annotations

from typing import Any

from simulation.engine.checkers import check_linearizable_per_key
from simulation.engine.clock import VirtualClock
from simulation.engine.history import History, OpRef
from simulation.worlds.lifecycle import LifecycleModel, fire_after
from simulation.worlds.service import START

T0 = START.isoformat()
T1 = START.replace(day=5).isoformat()


def new_history() -> History:
    history = History(VirtualClock(START))
    history.epoch = lambda: len(history.events)
    return history


def invoke(history: History, process: str, op: str, **args: Any) -> OpRef:
    return history.invoke(process, op, schedule=0, **args)


def violations(history: History) -> list[str]:
    found = check_linearizable_per_key(
        history, lambda _: LifecycleModel(T0), key=lambda op: op.args["schedule"]
    )
    return [v.message for v in found]


def test_concurrent_pauses_linearize_with_one_change() -> None:
    h = new_history()
    a = invoke(h, "a", "pause", expected_revision=1, now=T0)
    b = invoke(h, "b", "pause", expected_revision=1, now=T0)
    b.ok(("ok", "PAUSED", 1, None, False))
    a.ok(("ok", "PAUSED", 1, None, True))
    c = invoke(h, "a", "update", expected_revision=1, cadence=1, now=T0)
    c.ok(("ok", "PAUSED", 2, None, True))
    d = invoke(h, "b", "resume", expected_revision=1, now=T1)
    d.ok(("conflict", 2))
    assert violations(h) == []


def test_a_reopened_cancellation_is_rejected() -> None:
    h = new_history()
    invoke(h, "a", "cancel", expected_revision=1, now=T0).ok(("ok", "CANCELLED", 1, None, True))
    reopened = ("ok", "ACTIVE", 1, fire_after(0, T1), True)
    invoke(h, "b", "resume", expected_revision=1, now=T1).ok(reopened)
    assert violations(h)


def test_a_backfilled_resume_is_rejected() -> None:
    h = new_history()
    invoke(h, "a", "pause", expected_revision=1, now=T0).ok(("ok", "PAUSED", 1, None, True))
    # Resumed days later but firing at the instant it had before the pause: backfill.
    backfilled = ("ok", "ACTIVE", 1, fire_after(0, T0), True)
    invoke(h, "a", "resume", expected_revision=1, now=T1).ok(backfilled)
    assert violations(h)


def test_two_updates_from_one_revision_cannot_both_succeed() -> None:
    h = new_history()
    a = invoke(h, "a", "update", expected_revision=1, cadence=1, now=T0)
    b = invoke(h, "b", "update", expected_revision=1, cadence=2, now=T0)
    a.ok(("ok", "ACTIVE", 2, fire_after(1, T0), True))
    b.ok(("ok", "ACTIVE", 2, fire_after(2, T0), True))
    assert violations(h)


def test_a_due_scan_that_sees_a_paused_schedule_is_rejected() -> None:
    h = new_history()
    invoke(h, "a", "pause", expected_revision=1, now=T0).ok(("ok", "PAUSED", 1, None, True))
    invoke(h, "b", "due", now=T1).ok(True)
    assert violations(h)


def test_a_materialization_of_an_instant_inside_a_pause_is_rejected() -> None:
    h = new_history()
    invoke(h, "a", "pause", expected_revision=1, now=T0).ok(("ok", "PAUSED", 1, None, True))
    resumed_fire = fire_after(0, T1)
    invoke(h, "a", "resume", expected_revision=1, now=T1).ok(
        ("ok", "ACTIVE", 1, resumed_fire, True)
    )
    paused_instant = fire_after(0, T0)  # a nominal instant that fell inside the pause
    invoke(h, "b", "materialize", now=T1).ok(
        ("decided", "MATERIALIZED", paused_instant, resumed_fire)
    )
    assert violations(h)


def test_the_second_consecutive_miss_auto_pauses() -> None:
    h = new_history()
    model = LifecycleModel(T0)
    state = model.initial()
    late = START.replace(day=9, hour=12).isoformat()  # hours after an instant: outside grace
    state, first = model.apply(state, "materialize", {"now": late})
    assert first[1] == "MISSED"
    assert state[0] == "ACTIVE"
    later = START.replace(day=12, hour=12).isoformat()
    state, second = model.apply(state, "materialize", {"now": later})
    assert second[1] == "MISSED"
    assert state[0] == "PAUSED"
    assert second[3] is None
    invoke(h, "a", "materialize", now=late).ok(first)
    invoke(h, "a", "materialize", now=later).ok(second)
    invoke(h, "b", "due", now=later).ok(False)
    assert violations(h) == []
