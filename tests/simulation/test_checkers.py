"""The ledger and linearizability checkers reject deliberately bad inputs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from simulation.engine.checkers import check_ledger, check_linearizable, check_linearizable_per_key
from simulation.engine.checkers.models import RegisterModel, ScheduleLifecycleModel
from simulation.engine.clock import VirtualClock
from simulation.engine.history import History, StepRecord

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
S1 = UUID(int=1)


def occurrence(n: int, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": UUID(int=100 + n),
        "schedule_id": S1,
        "schedule_revision": 1,
        "nominal_fire_at": T0 + timedelta(days=n),
        "disposition": "MATERIALIZED",
        "session_id": UUID(int=200 + n),
        "run_id": UUID(int=300 + n),
        "reason_code": None,
        "authority_version": "v1",
        "materialized_at": T0 + timedelta(days=n, seconds=1),
        "links_erased_at": None,
    }
    row.update(overrides)
    return row


def linked(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    sessions = [
        {
            "id": r["session_id"],
            "metadata": {"schedule_id": str(r["schedule_id"]), "occurrence_id": str(r["id"])},
        }
        for r in rows
        if r["session_id"] is not None
    ]
    runs = [
        {"id": r["run_id"], "session_id": r["session_id"]} for r in rows if r["run_id"] is not None
    ]
    return runs, sessions


def invariants(found: list[Any]) -> set[str]:
    return {v.invariant for v in found}


def test_consistent_ledger_passes() -> None:
    rows = [occurrence(0), occurrence(1)]
    rows.append(
        occurrence(
            2,
            disposition="SKIPPED_OVERLAP",
            session_id=None,
            run_id=None,
            materialized_at=None,
            reason_code="schedule.overlap.skipped",
        )
    )
    runs, sessions = linked(rows)
    expected = {S1: [T0, T0 + timedelta(days=1), T0 + timedelta(days=2)]}
    assert check_ledger(rows, runs, sessions, expected=expected) == []


def test_duplicate_occurrence_is_rejected() -> None:
    a = occurrence(0)
    b = occurrence(0, id=UUID(int=999), session_id=UUID(int=998), run_id=UUID(int=997))
    runs, sessions = linked([a, b])
    found = check_ledger([a, b], runs, sessions)
    assert invariants(found) == {"ledger.unique"}
    assert "2 occurrences" in found[0].message


def test_undecided_due_instant_is_rejected() -> None:
    rows = [occurrence(0)]
    runs, sessions = linked(rows)
    found = check_ledger(rows, runs, sessions, expected={S1: [T0, T0 + timedelta(days=1)]})
    assert invariants(found) == {"ledger.unique"}
    assert "undecided" in found[0].message


def test_early_materialization_is_rejected() -> None:
    rows = [occurrence(0, materialized_at=T0 - timedelta(microseconds=1))]
    runs, sessions = linked(rows)
    assert invariants(check_ledger(rows, runs, sessions)) == {"ledger.not_early"}


def test_partial_occurrences_are_rejected() -> None:
    missing_run = occurrence(0, run_id=None)
    dangling = occurrence(1)
    linked_missed = occurrence(2, disposition="MISSED", reason_code=None)
    runs, sessions = linked([missing_run])
    found = check_ledger([missing_run, dangling, linked_missed], runs, sessions)
    messages = " | ".join(v.message for v in found if v.invariant == "ledger.not_partial")
    assert "missing session or run link" in messages
    assert "does not exist" in messages
    assert "MISSED row holds session/run links" in messages
    assert "without a reason_code" in messages


def test_erased_form_is_accepted_and_half_erased_rejected() -> None:
    erased = occurrence(0, session_id=None, run_id=None, links_erased_at=T0)
    half = occurrence(1, session_id=None, links_erased_at=T0)
    runs, _ = linked([half])
    assert check_ledger([erased]) == []
    assert invariants(check_ledger([half], runs, [])) == {"ledger.not_partial"}


def test_inconsistent_links_and_orphans_are_rejected() -> None:
    a, b = occurrence(0), occurrence(1)
    b["run_id"] = a["run_id"]  # one run claimed twice
    runs, sessions = linked([a])
    sessions.append({"id": b["session_id"], "metadata": {"schedule_id": str(S1)}})
    orphan_session = {"id": UUID(int=777), "metadata": {"schedule_id": str(S1)}}
    orphan_run = {"id": UUID(int=778), "session_id": UUID(int=777)}
    found = check_ledger([a, b], [*runs, orphan_run], [*sessions, orphan_session])
    messages = " | ".join(v.message for v in found if v.invariant == "ledger.links")
    assert "linked by 2 occurrences" in messages
    assert "belongs to session" in messages
    assert "has no occurrence (partial materialization)" in messages
    assert f"run {UUID(int=778)} of scheduled session" in messages


class Recorder:
    """Builds histories by hand: epochs stand for scheduler decisions."""

    def __init__(self) -> None:
        self.epoch = 0
        self.history = History(VirtualClock(T0), epoch=lambda: self.epoch)

    def at(self, epoch: int) -> Recorder:
        self.epoch = epoch
        return self


def test_concurrent_register_history_is_linearizable() -> None:
    r = Recorder()
    w = r.at(1).history.invoke("p1", "write", value=1)
    rd = r.at(2).history.invoke("p2", "read")
    r.at(3)
    w.ok()
    rd.ok(None)  # read overlapped the write: may see the old value
    result = check_linearizable(r.history.operations(), RegisterModel())
    assert result.valid
    assert result.order == ["p2#1", "p1#1"]


def test_stale_read_after_completed_write_is_rejected_with_explanation() -> None:
    r = Recorder()
    w = r.at(1).history.invoke("p1", "write", value=1)
    w.ok()
    r.history.steps.append(StepRecord(2, "p2", "register.read", 1, None))
    rd = r.at(3).history.invoke("p2", "read")
    rd.ok(None)
    result = check_linearizable(r.history.operations(), RegisterModel(), history=r.history)
    assert not result.valid
    assert result.conflicting == ("p1#1", "p2#1")
    assert "would return 1" in result.explanation
    assert "p2 leaves register.read#1" in result.explanation
    violation = result.violation("register")
    assert violation is not None
    assert violation.details["conflicting"] == ["p1#1", "p2#1"]


def test_indeterminate_write_may_or_may_not_have_happened() -> None:
    for observed in (None, 5):
        r = Recorder()
        w = r.at(1).history.invoke("p1", "write", value=5)
        w.info("commit ack lost")
        rd = r.at(3).history.invoke("p2", "read")
        rd.ok(observed)
        assert check_linearizable(r.history.operations(), RegisterModel()).valid
    r = Recorder()
    w = r.at(1).history.invoke("p1", "write", value=5)
    w.fail("rolled back")
    rd = r.at(3).history.invoke("p2", "read")
    rd.ok(5)  # a failed write must not be visible
    assert not check_linearizable(r.history.operations(), RegisterModel()).valid


def test_lifecycle_model_per_schedule() -> None:
    r = Recorder()
    # Schedule x: two concurrent pauses with the current revision; both ok (idempotent).
    p1 = r.at(1).history.invoke("a", "pause", schedule="x", expected_revision=1)
    p2 = r.history.invoke("b", "pause", schedule="x", expected_revision=1)
    r.at(2)
    p1.ok(("ok", "PAUSED", 1))
    p2.ok(("ok", "PAUSED", 1))
    # Schedule y: cancel completes, then a resume "succeeds": cancellation reopened.
    c = r.at(3).history.invoke("a", "cancel", schedule="y", expected_revision=1)
    c.ok(("ok", "CANCELLED", 1))
    res = r.at(4).history.invoke("b", "resume", schedule="y", expected_revision=1)
    res.ok(("ok", "ACTIVE", 1))
    found = check_linearizable_per_key(
        r.history, lambda _key: ScheduleLifecycleModel(), key=lambda op: op.args["schedule"]
    )
    assert [v.message.split(":")[0] for v in found] == ["y"]
    assert "would return ['conflict', 'CANCELLED', 1]" in found[0].message
