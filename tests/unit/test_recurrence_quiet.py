"""The quiet-reference fast paths (ADR 1741) agree with the general path.

``count_inclusive`` with both ends quiet answers by calendar arithmetic alone, and
``next_after`` / ``latest_at_or_before`` start at the wall clock's own date; each must
equal the general (resolving) path, above all right beside transitions, where a wrong
quiet test (one that ignores the footer rule, or a window too narrow) would count a
gap's or fold's date wrongly.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence
from scheduling.domain.recurrence.engine import span_inclusive
from scheduling.domain.recurrence.tzif import quiet, zone_transitions
from scheduling.recurrence import count_inclusive, latest_at_or_before, next_after

SEED = 1741
ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "Pacific/Apia", "America/Nuuk")
KINDS = (
    {"kind": "DAILY", "local_time": "02:30"},
    {"kind": "WEEKLY", "local_time": "01:30", "weekdays": [1, 5, 7]},
    {"kind": "MONTHLY", "local_time": "02:30", "days_of_month": [1, 8, 15], "last_day": True},
)


def _cadences() -> list[Cadence]:
    return [parse_cadence({**kind, "timezone": zone}) for zone in ZONES for kind in KINDS]


def _references(zone: str, rng: random.Random) -> list[datetime]:
    """Instants within a few days of real transitions (explicit and footer-rule ones),
    plus random ones."""
    start, end = datetime(2005, 1, 1, tzinfo=UTC), datetime(2045, 1, 1, tzinfo=UTC)
    near = [t.instant for t in zone_transitions(zone).between(start, end)]
    out = [t + timedelta(seconds=rng.randint(-4 * 86400, 4 * 86400)) for t in near]
    out += [
        start + timedelta(seconds=rng.randrange(int((end - start).total_seconds())))
        for _ in range(50)
    ]
    return out


def _general_next(cadence: Cadence, x: datetime) -> datetime | None:
    _, first, _ = span_inclusive(cadence, x + timedelta(microseconds=1), x + timedelta(days=400))
    return first


def _general_latest(cadence: Cadence, x: datetime) -> datetime | None:
    _, _, last = span_inclusive(cadence, x - timedelta(days=400), x)
    return last


@pytest.mark.parametrize("cadence", _cadences(), ids=lambda c: f"{c.kind}-{c.timezone}")
def test_fast_paths_equal_the_general_path(cadence: Cadence) -> None:
    rng = random.Random(SEED)
    assert cadence.timezone is not None
    for x in _references(cadence.timezone, rng):
        span = timedelta(seconds=rng.randint(0, 40 * 86400))
        expected = span_inclusive(cadence, x, x + span)[0]
        assert count_inclusive(cadence, x, x + span) == expected, (x, span, f"seed {SEED}")
        # span_inclusive resolves its own first/last through next/latest; cross-check
        # them against a window count instead of against themselves.
        following = next_after(cadence, x)
        assert following is not None
        assert following > x
        assert count_inclusive(cadence, x + timedelta(microseconds=1), following) == 1, x
        previous = latest_at_or_before(cadence, x)
        assert previous is not None
        assert previous <= x
        assert count_inclusive(cadence, previous, x) == 1, x
        assert _general_next(cadence, x) == following
        assert _general_latest(cadence, x) == previous


def test_quiet_sees_explicit_and_footer_transitions() -> None:
    """New York's 2007 and 2040 spring-forward instants (explicit data, footer rule)."""
    for at in (datetime(2007, 3, 11, 7, tzinfo=UTC), datetime(2040, 3, 11, 7, tzinfo=UTC)):
        second = int(at.timestamp())
        assert not quiet("America/New_York", second - 3 * 86400, second + 3 * 86400)
        assert not quiet("America/New_York", second, second)
        assert quiet("America/New_York", second + 86400, second + 5 * 86400)
    assert quiet("UTC", 0, 10**10)
