"""``format_instant``'s ``isoformat`` fast path (ADR 2460) prints exactly the text of
the ``strftime`` form it replaced, for every aware instant in every offset: UTC, ``Z``,
microseconds only if any, years before 1000 as ``%Y`` prints them. A fast path that
kept the ``+00:00`` suffix, or printed ``.000000``, fails here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from scheduling.domain.cadence import format_instant


def _reference(value: datetime) -> str:
    utc = value.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "Z"


offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@given(
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    offsets,
    st.booleans(),
)
def test_format_instant_prints_the_strftime_text(
    naive: datetime, offset: timezone, whole: bool
) -> None:
    value = (naive.replace(microsecond=0) if whole else naive).replace(tzinfo=offset)
    assert format_instant(value) == _reference(value)


def test_format_instant_examples() -> None:
    assert format_instant(datetime(2026, 6, 1, 7, tzinfo=UTC)) == "2026-06-01T07:00:00Z"
    paris = timezone(timedelta(hours=2))
    assert format_instant(datetime(2026, 6, 1, 9, 0, 0, 5, tzinfo=paris)) == (
        "2026-06-01T07:00:00.000005Z"
    )
    assert format_instant(datetime(999, 1, 1, tzinfo=UTC)) == _reference(
        datetime(999, 1, 1, tzinfo=UTC)
    )
