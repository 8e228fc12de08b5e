"""Public recurrence API (stable names; code outside this repository calls them).

All instants in and out are aware UTC; a naive argument raises
``scheduling.domain.errors.ValidationError`` (``schedule.recurrence.naive_instant``).
Each look-up accepts an optional ``OperationCounter`` to observe its bounded work.
"""

from __future__ import annotations

from scheduling.domain.recurrence.counter import OperationCounter
from scheduling.domain.recurrence.due import DueCalculation, RecurrenceCalculator, calculate_due
from scheduling.domain.recurrence.engine import (
    count_inclusive,
    first_at_or_after,
    latest_at_or_before,
    latest_firing,
    next_after,
    next_firing,
    span_inclusive,
    upcoming,
)
from scheduling.domain.recurrence.resolve import Firing, Resolution

__all__ = [
    "DueCalculation",
    "Firing",
    "OperationCounter",
    "RecurrenceCalculator",
    "Resolution",
    "calculate_due",
    "count_inclusive",
    "first_at_or_after",
    "latest_at_or_before",
    "latest_firing",
    "next_after",
    "next_firing",
    "span_inclusive",
    "upcoming",
]
