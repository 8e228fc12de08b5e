"""``utc_timestamp`` formats the date and time of day once per second (ADR 2660), and
its text is ``datetime``'s, character for character, rounding included."""

from __future__ import annotations

import logging
import math
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from scheduling import logs


def reference(created: float) -> str:
    """The formatting before ADR 2660: a ``datetime`` per line."""
    moment = datetime.fromtimestamp(created, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


SECOND = 1_764_748_800  # 2025-12-03T08:00:00Z

EDGES = [
    0.0,
    0.0005,
    0.9999994,
    0.9999995,  # rounds to the next second's microsecond 0 (half to even)
    0.9999996,  # carries into the next second: .000 of it, not .999
    SECOND + 0.9999996,
    SECOND + 0.0009999,
    SECOND + 0.9995,
    SECOND + 59.9999997,  # the carry crosses a minute
    SECOND + 86_399.9999998,  # and a day
    math.nextafter(float(SECOND + 1), 0.0),
]


@pytest.mark.parametrize("created", EDGES)
def test_the_text_is_datetimes_at_the_edges(created: float) -> None:
    assert logs.utc_timestamp(created) == reference(created)


def test_the_text_is_datetimes_anywhere() -> None:
    draw = random.Random(2660)
    values = [draw.uniform(0, 4e9) for _ in range(20_000)]
    values += [SECOND + k / 1e6 + d for k in range(0, 1_000_000, 991) for d in (0, 5e-7, -5e-7)]
    assert [v for v in values if logs.utc_timestamp(v) != reference(v)] == []


def test_of_the_test_truncating_the_fraction_is_caught() -> None:
    """A plausible cheaper formatting (the milliseconds of the raw fraction, no
    microsecond rounding) differs from ``datetime`` at a carry: the edges see it."""

    def truncating(created: float) -> str:
        prefix = datetime.fromtimestamp(int(created), tz=UTC).isoformat()[:19]
        return f"{prefix}.{int(created % 1 * 1000):03d}Z"

    assert [c for c in EDGES if truncating(c) != reference(c)] != []


def test_one_datetime_per_second_not_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[float] = []

    class Counting(datetime):
        @classmethod
        def fromtimestamp(cls, t: float, tz: Any = None) -> Any:
            built.append(t)
            return datetime.fromtimestamp(t, tz)

    monkeypatch.setattr(logs, "datetime", Counting)
    base = SECOND + 3600.0
    lines = [logs.utc_timestamp(base + k / 1000) for k in range(1000)]
    lines += [logs.utc_timestamp(base + 1 + k / 1000) for k in range(500)]
    assert len(set(lines)) == 1500
    assert lines[0] == "2025-12-03T09:00:00.000Z"
    assert lines[-1] == "2025-12-03T09:00:01.499Z"
    assert len(built) == 2  # one per second written, not 1,500


def test_a_text_line_reads_its_extras_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extras decide both the line's tail and whether a safe line is scanned; they
    are read once per line (they were read twice, ADR 2660)."""
    reads: list[str] = []
    original = logs._extras

    def counting(record: Any) -> dict[str, str]:
        reads.append(record.getMessage())
        return original(record)

    monkeypatch.setattr(logs, "_extras", counting)
    formatter = logs.TextFormatter(redact=lambda text: text)
    safe = logging.makeLogRecord(
        {"name": "scheduling.http.access", "msg": "GET / 200", "safe_fields": True}
    )
    coded = logging.makeLogRecord({"name": "x", "msg": "failed", "code": "schedule.x"})
    assert formatter.format(safe).endswith("scheduling.http.access: GET / 200")
    assert formatter.format(coded).endswith("x: failed [code=schedule.x]")
    assert reads == ["GET / 200", "failed"]
