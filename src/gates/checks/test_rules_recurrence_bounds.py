"""gate.schedule.civil_time: look-ups whose bounds fall exactly on, or between, whole seconds.

Nominal instants are whole seconds, but references, counts' bounds and a repair's
stored instant need not be: a firing half a second before a bound is outside it. An
implementation that steps back a whole second (instead of a microsecond) to make a
bound inclusive counts it, reports it as the first instant at or after the bound, or
takes it as the next one. A reference exactly at a nominal instant is the other edge:
that instant is the latest at or before it and is counted by a span ending there (an
implementation that compares the wall clock strictly in its quiet-reference shortcut
answers the day before). Each case is compared with the independent oracle, in UTC
and next to a real DST gap and fold (where counts take the resolving path).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from gates.checks.recurrence_support import oracle_count, oracle_latest, oracle_next
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import DailyCadence, WeeklyCadence
from scheduling.recurrence import (
    calculate_due,
    count_inclusive,
    first_at_or_after,
    latest_at_or_before,
    next_after,
    span_inclusive,
)

GATE = "gate.schedule.civil_time"

HALF = timedelta(milliseconds=500)
MICRO = timedelta(microseconds=1)

# (cadence, a nominal instant of it): UTC, a New York day after the spring gap, a
# Dublin day at its (negative-DST) change, a Lord Howe day after its 30-minute fold.
CASES = (
    (DailyCadence(time(9), "UTC"), datetime(2026, 3, 10, 9, tzinfo=UTC)),
    (DailyCadence(time(9), "America/New_York"), datetime(2026, 3, 9, 13, tzinfo=UTC)),
    (WeeklyCadence(time(1, 30), "Europe/Dublin", (7,)), datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
    (DailyCadence(time(1, 45), "Australia/Lord_Howe"), datetime(2026, 4, 4, 14, 45, tzinfo=UTC)),
)


@pytest.mark.gate(GATE)
def test_bounds_between_whole_seconds(gate_evidence: GateEvidence) -> None:
    checked = 0
    for cadence, nominal in CASES:
        assert next_after(cadence, nominal - MICRO) == nominal, cadence
        # Exactly at the nominal instant: it is the latest, and it is due now.
        assert latest_at_or_before(cadence, nominal) == nominal, cadence
        assert oracle_latest(cadence, nominal) == nominal, cadence
        assert latest_at_or_before(cadence, nominal - MICRO) == oracle_latest(
            cadence, nominal - MICRO
        )
        due = calculate_due(cadence, timedelta(seconds=1), nominal, next_fire_at=nominal)
        assert due.candidate == nominal, (cadence, due)
        assert due.within_grace, (cadence, due)
        assert due.next_future == oracle_next(cadence, nominal), (cadence, due)
        for days in (1, 30):
            assert count_inclusive(cadence, nominal, nominal + timedelta(days=days)) == (
                oracle_count(cadence, nominal, nominal + timedelta(days=days))
            )
            assert count_inclusive(cadence, nominal - timedelta(days=days), nominal) == (
                oracle_count(cadence, nominal - timedelta(days=days), nominal)
            )
        for offset in (HALF, MICRO, timedelta(milliseconds=999)):
            start = nominal + offset
            expected_next = oracle_next(cadence, start)
            assert expected_next is not None
            assert expected_next > start
            # The firing just before the bound is not at or after it.
            assert first_at_or_after(cadence, start) == expected_next, (cadence, start)
            for end in (start + timedelta(days=3), start + timedelta(days=40)):
                expected = oracle_count(cadence, start, end)
                assert count_inclusive(cadence, start, end) == expected, (cadence, start, end)
                count, first, _ = span_inclusive(cadence, start, end)
                assert count == expected, (cadence, start, end)
                assert first == (expected_next if expected else None), (cadence, start, first)
            # Ending a hair before the nominal instant leaves it out; at it, includes it.
            before = nominal - offset
            span_start = nominal - timedelta(days=5)
            assert count_inclusive(cadence, span_start, before) == oracle_count(
                cadence, span_start, before
            )
            assert count_inclusive(cadence, span_start, nominal) == oracle_count(
                cadence, span_start, nominal
            )
            checked += 1
    gate_evidence.record("subsecond_bounds_checked", checked)
