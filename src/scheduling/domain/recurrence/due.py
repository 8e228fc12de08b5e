"""What is due for one revision at one reference instant (spec "Misfires and downtime").

``RecurrenceCalculator().due(revision, now, next_fire_at=...)`` answers in bounded work:

* ``candidate``: the latest nominal instant at or before ``now`` (and not before the
  first undecided instant ``next_fire_at`` when given), or None when nothing is due;
* ``within_grace``: ``now - candidate <= misfire_grace_seconds`` - materialize it;
  otherwise it is ``missed`` (record MISSED, create no run);
* ``coalesced_first`` / ``coalesced_last`` / ``coalesced_count``: the older due instants
  in ``[next_fire_at, candidate)``, folded into one ``schedule.misfires_coalesced`` event;
* ``next_future``: the first nominal instant strictly after ``now`` - the new
  ``next_fire_at`` (None: a one-time cadence has no further instant).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduling.domain.cadence import Cadence
from scheduling.domain.recurrence.counter import OperationCounter, ensure
from scheduling.domain.recurrence.engine import (
    latest_at_or_before,
    next_after,
    span_inclusive,
    utc_instant,
)
from scheduling.domain.revision import ScheduleRevision

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class DueCalculation:
    """The calculator's decision inputs for one scan of one schedule."""

    now: datetime
    candidate: datetime | None
    within_grace: bool
    coalesced_first: datetime | None
    coalesced_last: datetime | None
    coalesced_count: int
    next_future: datetime | None

    @property
    def is_due(self) -> bool:
        return self.candidate is not None

    @property
    def missed(self) -> bool:
        """A due candidate outside the grace window: record MISSED, create no run."""
        return self.candidate is not None and not self.within_grace


def calculate_due(
    cadence: Cadence,
    grace: timedelta,
    now: datetime,
    *,
    next_fire_at: datetime | None = None,
    counter: OperationCounter | None = None,
) -> DueCalculation:
    """``due`` for a bare cadence and grace window (what ``RecurrenceCalculator`` wraps)."""
    now = utc_instant(now, "now")
    since = None if next_fire_at is None else utc_instant(next_fire_at, "next_fire_at")
    ops = ensure(counter)
    future = next_after(cadence, now, ops)
    latest = latest_at_or_before(cadence, now, ops)
    if latest is None or (since is not None and latest < since):
        return DueCalculation(now, None, False, None, None, 0, future)
    within = now - latest <= grace
    first = last = None
    count = 0
    if since is not None and since < latest:
        count, first, last = span_inclusive(cadence, since, latest - _TICK, ops)
    return DueCalculation(now, latest, within, first, last, count, future)


class RecurrenceCalculator:
    """The spec's ``RecurrenceCalculator`` port, implemented purely (no I/O, no clock).

    ``next_fire_at`` is the schedule's cached first undecided nominal instant; older
    instants are not counted as missed (they were decided already, or fell in a pause).
    Without it only the latest due instant is reported and nothing is coalesced.
    """

    def __init__(self, counter: OperationCounter | None = None) -> None:
        self.counter = counter

    def due(
        self,
        revision: ScheduleRevision,
        now: datetime,
        *,
        next_fire_at: datetime | None = None,
    ) -> DueCalculation:
        return calculate_due(
            revision.cadence_value,
            timedelta(seconds=revision.misfire_grace_seconds),
            now,
            next_fire_at=next_fire_at,
            counter=self.counter,
        )
