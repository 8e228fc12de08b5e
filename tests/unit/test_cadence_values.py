"""Cadence parsing: one stable code per defect, canonical accepted values."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

import pytest

from scheduling import DailyCadence, MonthDay, parse_cadence
from scheduling.domain import cadence as cad
from scheduling.domain.errors import ValidationError

NY = "America/New_York"


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"kind": "ONCE", "at": "2026-03-08T02:30:00"}, cad.NAIVE_INSTANT),
        ({"kind": "ONCE", "at": "2026-03-08"}, cad.INVALID_INSTANT),
        ({"kind": "ONCE", "at": "2026-03-08T02:30:00Z", "timezone": NY}, cad.UNKNOWN_FIELD),
        ({"kind": "DAILY", "local_time": "09:00", "timezone": "Mars/Base"}, cad.INVALID_TIMEZONE),
        ({"kind": "DAILY", "local_time": "09:00", "timezone": "Factory"}, cad.INVALID_TIMEZONE),
        ({"kind": "DAILY", "local_time": "9:00", "timezone": NY}, cad.INVALID_LOCAL_TIME),
        ({"kind": "DAILY", "local_time": "09:00"}, cad.MISSING_FIELD),
        (
            {"kind": "WEEKLY", "local_time": "09:00", "timezone": NY, "weekdays": [1, 1]},
            cad.WEEKDAY_DUPLICATE,
        ),
        (
            {"kind": "WEEKLY", "local_time": "09:00", "timezone": NY, "weekdays": [0]},
            cad.WEEKDAY_OUT_OF_RANGE,
        ),
        (
            {"kind": "WEEKLY", "local_time": "09:00", "timezone": NY, "weekdays": []},
            cad.WEEKDAYS_EMPTY,
        ),
        ({"kind": "MONTHLY", "local_time": "09:00", "timezone": NY}, cad.MONTHLY_EMPTY),
        (
            {"kind": "MONTHLY", "local_time": "09:00", "timezone": NY, "days_of_month": [32]},
            cad.DAY_OUT_OF_RANGE,
        ),
        ({"kind": "YEARLY", "local_time": "09:00", "timezone": NY, "dates": []}, cad.YEARLY_EMPTY),
        (
            {
                "kind": "YEARLY",
                "local_time": "09:00",
                "timezone": NY,
                "dates": [{"month": 4, "day": 31}],
            },
            cad.YEARLY_DATE_IMPOSSIBLE,
        ),
        (
            {
                "kind": "YEARLY",
                "local_time": "09:00",
                "timezone": NY,
                "dates": [{"month": 2, "day": 30}],
            },
            cad.YEARLY_DATE_IMPOSSIBLE,
        ),
        ({"kind": "CRON", "expr": "*"}, cad.UNKNOWN_KIND),
        ([], cad.NOT_AN_OBJECT),
    ],
)
def test_each_defect_has_its_code(payload: Any, code: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_cadence(payload)
    assert caught.value.code == code


def test_accepted_values_are_canonical() -> None:
    yearly = parse_cadence(
        {
            "kind": "YEARLY",
            "local_time": "07:05",
            "timezone": NY,
            "dates": [{"month": 12, "day": 31}, {"month": 2, "day": 29}],
        }
    )
    assert yearly.to_payload() == {
        "kind": "YEARLY",
        "local_time": "07:05:00",
        "timezone": NY,
        "dates": [{"month": 2, "day": 29}, {"month": 12, "day": 31}],
    }
    once = parse_cadence({"kind": "ONCE", "at": "2026-03-08T02:30:00.250-05:00"})
    assert once.to_payload() == {"kind": "ONCE", "at": "2026-03-08T07:30:00.250000Z"}
    assert once.at == datetime(2026, 3, 8, 7, 30, 0, 250000, tzinfo=UTC)


def test_direct_construction_is_validated_too() -> None:
    assert DailyCadence(time(9), NY).timezone == NY
    with pytest.raises(ValidationError):
        DailyCadence(time(9), "Nowhere/Special")
    with pytest.raises(ValidationError):
        MonthDay(2, 30)
