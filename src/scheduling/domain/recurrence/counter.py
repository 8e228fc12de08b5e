"""Operation counting: how boundedness is proven without timing.

Every look-up accepts an optional ``OperationCounter``. Tests compare the counts of a
one-week span with a hundred-year span: a calculator that loops per occurrence shows a
count that grows with the span, however fast each step is.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OperationCounter:
    """Counts of the calculator's unit operations."""

    zone_lookups: int = 0
    """Calls into zoneinfo (an offset or a UTC-to-local conversion)."""
    resolutions: int = 0
    """Candidate civil dates resolved to an instant."""
    calendar_steps: int = 0
    """Iterations of calendar arithmetic (months or years scanned for a selector)."""
    transitions_scanned: int = 0
    """Zone transitions examined while correcting a count for swallowed dates."""

    @property
    def total(self) -> int:
        return self.zone_lookups + self.resolutions + self.calendar_steps + self.transitions_scanned


# Look-ups without a caller-supplied counter count into a throwaway one.
def ensure(counter: OperationCounter | None) -> OperationCounter:
    return counter if counter is not None else OperationCounter()
