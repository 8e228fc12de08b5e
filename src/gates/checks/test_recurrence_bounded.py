"""Downtime catch-up is bounded - the calculator halves of gate.schedule.misfire_bounded
(daily / weekly / once) and gate.schedule.calendar_misfire_bounded (monthly / yearly).

Each case advances the reference across thousands of nominal instants (years to
centuries) and checks ``due`` against the oracle's day-by-day enumeration: one candidate
(the latest due instant), one coalesced first/last/count for the older ones, and the
first future instant. Boundedness is proven by counting operations, not by timing: the
long span must cost what a one-week span costs, give or take a constant.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gates.checks.recurrence_support import oracle_instants
from gates.runner.pytest_plugin import GateEvidence
from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence
from scheduling.recurrence import (
    DueCalculation,
    OperationCounter,
    calculate_due,
    first_at_or_after,
    next_after,
)

MISFIRE = "gate.schedule.misfire_bounded"
CALENDAR = "gate.schedule.calendar_misfire_bounded"
TICK = timedelta(microseconds=1)

# A bound independent of the span: a few candidate dates, each resolved with at most
# two bisections of a gap, plus a handful of calendar steps.
MAX_RESOLUTIONS = 40
MAX_CALENDAR_STEPS = 200


DueFunction = Callable[..., DueCalculation]


def _check_due(
    cadence: Cadence,
    since: datetime,
    now: datetime,
    grace: timedelta,
    due_function: DueFunction = calculate_due,
) -> tuple[dict[str, Any], OperationCounter]:
    counter = OperationCounter()
    due = due_function(cadence, grace, now, next_fire_at=since, counter=counter)
    first_day = since.date() - timedelta(days=2)
    expected = oracle_instants(cadence, first_day, now.date() + timedelta(days=9 * 366))
    due_instants = [n for n in expected if since <= n <= now]
    future = [n for n in expected if n > now]
    assert due.candidate == due_instants[-1]
    assert due.within_grace == (now - due_instants[-1] <= grace)
    assert due.missed == (not due.within_grace)
    older = due_instants[:-1]
    assert due.coalesced_count == len(older)
    assert due.coalesced_first == (older[0] if older else None)
    assert due.coalesced_last == (older[-1] if older else None)
    assert due.next_future == (future[0] if future else None)
    assert counter.resolutions <= MAX_RESOLUTIONS, counter
    assert counter.calendar_steps <= MAX_CALENDAR_STEPS, counter
    return (
        {"coalesced": due.coalesced_count, "missed": due.missed, "ops": vars(counter).copy()},
        counter,
    )


def assert_bounded(
    cadence: Cadence,
    since: datetime,
    long_now: datetime,
    due_function: DueFunction = calculate_due,
) -> dict[str, Any]:
    """``due`` over one week and over ``long_now`` agrees with the oracle, at the same cost."""
    grace = timedelta(hours=1)
    first = first_at_or_after(cadence, since)
    second = None if first is None else next_after(cadence, first)
    assert first is not None
    # One week of downtime, long enough to coalesce at least one older instant.
    short_now = max(first + timedelta(days=7), (second or first) + timedelta(minutes=1))
    short, short_ops = _check_due(cadence, since, short_now, grace, due_function)
    long, long_ops = _check_due(cadence, since, long_now, grace, due_function)
    # The long span may meet a few more gaps to bisect; it must not meet more dates.
    assert long_ops.resolutions <= short_ops.resolutions + 6, (short_ops, long_ops)
    assert long_ops.total <= 2 * short_ops.total + 120, (short_ops, long_ops)
    return {"cadence": cadence.to_payload(), "one_week": short, "long_span": long}


DAILY_CASES = [
    ({"kind": "DAILY", "local_time": "02:30", "timezone": "America/New_York"}, 5000),
    ({"kind": "DAILY", "local_time": "23:30", "timezone": "America/Nuuk"}, 4000),
    ({"kind": "DAILY", "local_time": "02:15", "timezone": "Australia/Lord_Howe"}, 6000),
    ({"kind": "DAILY", "local_time": "09:00", "timezone": "Pacific/Apia"}, 3000),
    (
        {"kind": "WEEKLY", "local_time": "01:30", "timezone": "Europe/London", "weekdays": [7]},
        36500,
    ),
    (
        {
            "kind": "WEEKLY",
            "local_time": "00:00",
            "timezone": "America/Sao_Paulo",
            "weekdays": [1, 7],
        },
        20000,
    ),
    ({"kind": "ONCE", "at": "2009-06-01T12:00:00+02:00"}, 7000),
]


@pytest.mark.gate(MISFIRE, facet="calculator")
def test_daily_weekly_once_catch_up_is_bounded(gate_evidence: GateEvidence) -> None:
    since = datetime(2009, 6, 1, tzinfo=UTC)
    for payload, days in DAILY_CASES:
        cadence = parse_cadence(payload)
        gate_evidence.append(
            "cases", assert_bounded(cadence, since, since + timedelta(days=days, hours=5))
        )
    largest = max(c["long_span"]["coalesced"] for c in gate_evidence.values["cases"])
    gate_evidence.record("largest_coalesced", largest)
    if largest < 1000:
        gate_evidence.not_covered("no case crossed thousands of nominal instants")


CALENDAR_CASES = [
    (
        {
            "kind": "MONTHLY",
            "local_time": "02:30",
            "timezone": "America/New_York",
            "days_of_month": [8, 29, 30, 31],
            "last_day": True,
        },
        365 * 100,
    ),
    (
        {
            "kind": "MONTHLY",
            "local_time": "00:00",
            "timezone": "America/Santiago",
            "days_of_month": [1],
            "last_day": False,
        },
        365 * 120,
    ),
    (
        {
            "kind": "MONTHLY",
            "local_time": "09:00",
            "timezone": "Pacific/Apia",
            "days_of_month": [30],
            "last_day": False,
        },
        365 * 30,
    ),
    (
        {
            "kind": "YEARLY",
            "local_time": "09:00",
            "timezone": "Europe/Berlin",
            "dates": [{"month": 2, "day": 29}],
        },
        365 * 400,
    ),
    (
        {
            "kind": "YEARLY",
            "local_time": "01:30",
            "timezone": "America/New_York",
            "dates": [{"month": 3, "day": 8}, {"month": 11, "day": 1}, {"month": 12, "day": 31}],
        },
        365 * 300,
    ),
]


@pytest.mark.gate(CALENDAR, facet="calculator")
def test_monthly_yearly_catch_up_is_bounded(gate_evidence: GateEvidence) -> None:
    since = datetime(1990, 1, 1, tzinfo=UTC)
    for payload, days in CALENDAR_CASES:
        cadence = parse_cadence(payload)
        gate_evidence.append(
            "cases", assert_bounded(cadence, since, since + timedelta(days=days, hours=7))
        )
    largest = max(c["long_span"]["coalesced"] for c in gate_evidence.values["cases"])
    gate_evidence.record("largest_coalesced", largest)
    if largest < 1000:
        gate_evidence.not_covered("no calendar case crossed thousands of nominal instants")
