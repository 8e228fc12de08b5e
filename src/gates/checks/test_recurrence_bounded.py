"""Downtime catch-up is bounded - the calculator halves of gate.schedule.misfire_bounded
(daily / weekly / once) and gate.schedule.calendar_misfire_bounded (monthly / yearly).

Each case advances the reference across thousands of nominal instants (years to
centuries) and checks ``due`` against the oracle's day-by-day enumeration: one candidate
(the latest due instant), one coalesced first/last/count for the older ones, and the
first future instant. Boundedness is proven by counting operations, not by timing: the
long span must cost what a one-week span costs, give or take a constant.

The product's own ``OperationCounter`` is only half of that proof (a calculator that
loops without touching it would pass). The other half is measured by the harness
(``gates.checks.work_meter``): the product Python lines executed by each of next after,
latest at or before, inclusive count and ``due``, on every kind, must stay under
``LINE_CEILING`` whatever the span, and the long span's lines within ``LINE_RATIO``
times the one-week span's (floored at ``LINE_FLOOR``). Each kind's long span crosses
at least ``2 * LINE_CEILING`` instants, so a loop that executes one line per missed
instant cannot fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gates.checks.recurrence_support import oracle_instants
from gates.checks.work_meter import PRODUCT_ROOT, metered
from gates.runner.pytest_plugin import GateEvidence
from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence
from scheduling.recurrence import (
    DueCalculation,
    OperationCounter,
    calculate_due,
    count_inclusive,
    first_at_or_after,
    latest_at_or_before,
    next_after,
)

MISFIRE = "gate.schedule.misfire_bounded"
CALENDAR = "gate.schedule.calendar_misfire_bounded"
TICK = timedelta(microseconds=1)

# A bound independent of the span: a few candidate dates, each resolved with at most
# two bisections of a gap, plus a handful of calendar steps.
MAX_RESOLUTIONS = 40
MAX_CALENDAR_STEPS = 200


# Harness-measured bounds (product lines executed, gates.checks.work_meter). The real
# look-ups execute at most ~1,200 warm lines whatever the span.
LINE_CEILING = 3_000
LINE_RATIO = 3
LINE_FLOOR = 500

DueFunction = Callable[..., DueCalculation]
NextFunction = Callable[..., datetime | None]
CountFunction = Callable[..., int]


@dataclass(frozen=True)
class Lookups:
    """The look-ups whose work is metered (the real ones by default; tests of the
    test pass wrong ones)."""

    next_after: NextFunction = next_after
    latest_at_or_before: NextFunction = latest_at_or_before
    count_inclusive: CountFunction = count_inclusive
    due: DueFunction = calculate_due
    extra_roots: tuple[str, ...] = ()
    """Files metered as product besides the ``scheduling`` package (a test of the test's
    wrong look-up lives outside it)."""


REAL_LOOKUPS = Lookups()


def _metered_lookups(
    lookups: Lookups, cadence: Cadence, since: datetime, now: datetime
) -> dict[str, int]:
    """Product lines each look-up executes at ``now`` (after one warm-up call, so
    caches filled once do not count against the short span)."""
    grace = timedelta(hours=1)
    calls: dict[str, Callable[[], object]] = {
        "next_after": lambda: lookups.next_after(cadence, now),
        "latest_at_or_before": lambda: lookups.latest_at_or_before(cadence, now),
        "count_inclusive": lambda: lookups.count_inclusive(cadence, since, now),
        "due": lambda: lookups.due(cadence, grace, now, next_fire_at=since),
    }
    lines = {}
    for name, call in calls.items():
        call()
        lines[name] = metered(call, roots=(PRODUCT_ROOT, *lookups.extra_roots))[1].lines
    return lines


def assert_metered_bounded(
    cadence: Cadence,
    since: datetime,
    short_now: datetime,
    long_now: datetime,
    lookups: Lookups = REAL_LOOKUPS,
) -> dict[str, Any]:
    """Harness-measured work: span-independent and under the ceiling, per look-up."""
    short = _metered_lookups(lookups, cadence, since, short_now)
    long = _metered_lookups(lookups, cadence, since, long_now)
    for name in short:
        assert long[name] <= LINE_CEILING, (
            f"{name} executed {long[name]} product lines over the long span "
            f"(ceiling {LINE_CEILING}): it loops over the missed instants"
        )
        assert long[name] <= LINE_RATIO * max(short[name], LINE_FLOOR), (
            f"{name}: {long[name]} lines over the long span vs {short[name]} over one week"
        )
    return {"one_week_lines": short, "long_span_lines": long}


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
    lookups: Lookups | None = None,
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
    metered_lookups = lookups or Lookups(due=due_function)
    work = assert_metered_bounded(cadence, since, short_now, long_now, metered_lookups)
    instants = count_inclusive(cadence, since, long_now)
    return {
        "cadence": cadence.to_payload(),
        "one_week": short,
        "long_span": long,
        "long_span_instants": instants,
        "harness_measured": work,
    }


DAILY_CASES: list[tuple[dict[str, Any], int]] = [
    ({"kind": "DAILY", "local_time": "09:00", "timezone": "America/New_York"}, 36525),
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
        36500,
    ),
    ({"kind": "ONCE", "at": "2009-06-01T12:00:00+02:00"}, 7000),
]


def require_loop_cannot_fit(ev: GateEvidence, kinds: tuple[str, ...]) -> None:
    """Each kind needs a long span with more instants than twice the line ceiling:
    otherwise a one-line-per-instant loop could hide under it."""
    for kind in kinds:
        spans = [
            c["long_span_instants"] for c in ev.values["cases"] if c["cadence"]["kind"] == kind
        ]
        if max(spans, default=0) < 2 * LINE_CEILING:
            ev.not_covered(f"no {kind} case crossed {2 * LINE_CEILING} instants")


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
    require_loop_cannot_fit(gate_evidence, ("DAILY", "WEEKLY"))


CALENDAR_CASES: list[tuple[dict[str, Any], int]] = [
    (
        {
            "kind": "MONTHLY",
            "local_time": "07:30",
            "timezone": "Australia/Lord_Howe",
            "days_of_month": [31],
            "last_day": True,
        },
        365 * 1000,
    ),
    (
        {
            "kind": "YEARLY",
            "local_time": "02:30",
            "timezone": "Europe/London",
            "dates": [{"month": 2, "day": 29}, {"month": 6, "day": 30}, {"month": 10, "day": 31}],
        },
        365 * 3000,
    ),
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
    require_loop_cannot_fit(gate_evidence, ("MONTHLY", "YEARLY"))


def _due_from_a_nominal_next_fire(cases: list[tuple[dict[str, Any], int]]) -> list[int]:
    """``due`` where ``next_fire_at`` is what production stores - a nominal instant, the
    first undecided one - four hundred days before ``now``: that instant is the first
    coalesced one (the cases above start from midnight, which is not one)."""
    coalesced = []
    for payload, _ in cases:
        cadence = parse_cadence(payload)
        since = first_at_or_after(cadence, datetime(2011, 12, 20, tzinfo=UTC))
        assert since is not None
        now = since + timedelta(days=400, hours=1)
        facts, _ = _check_due(cadence, since, now, timedelta(hours=1))
        coalesced.append(facts["coalesced"])
    return coalesced


@pytest.mark.gate(MISFIRE, facet="calculator")
def test_daily_weekly_coalescing_starts_at_next_fire_at(gate_evidence: GateEvidence) -> None:
    gate_evidence.record("coalesced", _due_from_a_nominal_next_fire(DAILY_CASES[:-1]))


@pytest.mark.gate(CALENDAR, facet="calculator")
def test_monthly_yearly_coalescing_starts_at_next_fire_at(gate_evidence: GateEvidence) -> None:
    gate_evidence.record("coalesced", _due_from_a_nominal_next_fire(CALENDAR_CASES))
