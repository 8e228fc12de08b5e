"""gate.schedule.calendar_recurrence: monthly counts across leap years, deterministically.

An inclusive count over a monthly cadence is a closed-form prefix difference over a
table of selected dates before each month; a leap year's table differs from a common
year's only by a selected February 29 (day 29 numbered, or the month end). Reading the
common-year table in a leap year loses that date for every count ending after February
of a leap year, while counts inside one month, or ending in February, stay right. Here
spans start and end on either side of February in leap years (2028, 2000), a
non-leap century year (2100) and common years, for numbered days 29..31 and last_day,
and each count equals the independent oracle's.
"""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from gates.checks.recurrence_support import oracle_count
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import MonthlyCadence
from scheduling.recurrence import count_inclusive, span_inclusive

GATE = "gate.schedule.calendar_recurrence"

SELECTORS: tuple[tuple[tuple[int, ...], bool], ...] = (
    ((29,), False),
    ((29, 30), False),
    ((1, 29), False),
    ((30,), False),
    ((31,), False),
    ((), True),
    ((28,), True),
    ((15, 29), True),
)

# (start, end) UTC instants: after February of a leap year, across it, a whole leap
# year, a non-leap century and a multi-year span.
SPANS = (
    (datetime(2028, 3, 1, tzinfo=UTC), datetime(2028, 12, 31, 23, tzinfo=UTC)),
    (datetime(2028, 1, 15, tzinfo=UTC), datetime(2028, 3, 2, tzinfo=UTC)),
    (datetime(2028, 2, 1, tzinfo=UTC), datetime(2028, 2, 29, 23, tzinfo=UTC)),
    (datetime(2000, 2, 28, tzinfo=UTC), datetime(2000, 7, 1, tzinfo=UTC)),
    (datetime(2100, 2, 1, tzinfo=UTC), datetime(2100, 6, 1, tzinfo=UTC)),
    (datetime(2027, 11, 20, tzinfo=UTC), datetime(2029, 4, 3, tzinfo=UTC)),
    (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 12, 31, tzinfo=UTC)),
)


@pytest.mark.gate(GATE)
def test_monthly_counts_across_leap_februaries(gate_evidence: GateEvidence) -> None:
    checked = 0
    for days, last_day in SELECTORS:
        for zone in ("UTC", "Europe/Paris"):
            cadence = MonthlyCadence(time(12), zone, days, last_day)
            for start, end in SPANS:
                expected = oracle_count(cadence, start, end)
                got = count_inclusive(cadence, start, end)
                assert got == expected, f"count({cadence}, {start}, {end}) = {got} != {expected}"
                assert span_inclusive(cadence, start, end)[0] == expected, (cadence, start, end)
                checked += 1
    gate_evidence.record("monthly_leap_counts_checked", checked)
