"""RecurrenceCalculator.due and the public look-ups' contract on naive input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from scheduling import parse_cadence
from scheduling.domain.errors import ValidationError
from scheduling.domain.revision import ScheduleRevision
from scheduling.recurrence import (
    OperationCounter,
    RecurrenceCalculator,
    count_inclusive,
    latest_at_or_before,
    next_after,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def revision(cadence: dict[str, object], grace: int = 3600) -> ScheduleRevision:
    return ScheduleRevision(
        schedule_id=UUID(int=1),
        revision=1,
        title="t",
        instruction="i",
        agent_id=UUID(int=2),
        agent_version="v",
        policy_profile="p",
        requested_scopes=frozenset(),
        limits={"max_steps": 1, "max_model_calls": 1, "max_tool_calls": 1, "max_cost": "1"},
        run_timeout_seconds=60,
        cadence=cadence,
        misfire_grace_seconds=grace,
        max_consecutive_failures=2,
        created_by_principal_id="u",
        created_at=T0,
    )


DAILY = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}


def test_due_within_grace_coalesces_older_instants() -> None:
    counter = OperationCounter()
    calc = RecurrenceCalculator(counter)
    since = datetime(2026, 1, 1, 8, tzinfo=UTC)  # 09:00 Paris
    due = calc.due(revision(DAILY), datetime(2026, 1, 10, 8, 30, tzinfo=UTC), next_fire_at=since)
    assert due.candidate == datetime(2026, 1, 10, 8, tzinfo=UTC)
    assert due.within_grace
    assert not due.missed
    assert (due.coalesced_first, due.coalesced_last, due.coalesced_count) == (
        since,
        datetime(2026, 1, 9, 8, tzinfo=UTC),
        9,
    )
    assert due.next_future == datetime(2026, 1, 11, 8, tzinfo=UTC)
    assert counter.resolutions > 0


def test_due_outside_grace_is_missed() -> None:
    due = RecurrenceCalculator().due(
        revision(DAILY, grace=60), datetime(2026, 1, 10, 9, tzinfo=UTC), next_fire_at=T0
    )
    assert due.missed
    assert due.candidate == datetime(2026, 1, 10, 8, tzinfo=UTC)


def test_nothing_due_before_next_fire_at() -> None:
    nominal = datetime(2026, 1, 2, 8, tzinfo=UTC)
    due = RecurrenceCalculator().due(
        revision(DAILY), nominal - timedelta(microseconds=1), next_fire_at=nominal
    )
    assert not due.is_due
    assert due.next_future == nominal


def test_one_time_after_grace_is_missed_with_no_future() -> None:
    once = {"kind": "ONCE", "at": "2026-01-02T00:00:00Z"}
    due = RecurrenceCalculator().due(
        revision(once, grace=60), datetime(2026, 1, 3, tzinfo=UTC), next_fire_at=T0
    )
    assert due.missed
    assert due.next_future is None
    assert due.coalesced_count == 0


def test_naive_instants_raise_a_stable_code() -> None:
    cadence = parse_cadence(DAILY)
    naive = datetime(2026, 1, 1)
    for call in (
        lambda: next_after(cadence, naive),
        lambda: latest_at_or_before(cadence, naive),
        lambda: count_inclusive(cadence, naive, T0),
        lambda: RecurrenceCalculator().due(revision(DAILY), naive),
    ):
        with pytest.raises(ValidationError) as caught:
            call()
        assert caught.value.code == "schedule.recurrence.naive_instant"


def test_the_edges_of_datetimes_range_do_not_overflow() -> None:
    cadence = parse_cadence(
        {"kind": "DAILY", "local_time": "09:00", "timezone": "Pacific/Kiritimati"}
    )
    latest = datetime.max.replace(tzinfo=UTC)
    earliest = datetime.min.replace(tzinfo=UTC)
    assert next_after(cadence, latest) is None
    assert latest_at_or_before(cadence, earliest) is None
    assert latest_at_or_before(cadence, latest) == datetime(9999, 12, 30, 19, tzinfo=UTC)
    # Every local date of the proleptic calendar but 1994-12-31, which Kiritimati skipped.
    days = (latest - earliest).days + 1
    assert count_inclusive(cadence, earliest, latest) == days - 1
