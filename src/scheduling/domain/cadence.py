"""The closed cadence union: ONCE, DAILY, WEEKLY, MONTHLY, YEARLY.

``parse_cadence(payload)`` is the only way from untrusted input to a ``Cadence``; every
rejection carries its own registered ``schedule.cadence.*`` code. Accepted values are
canonical (sorted unique selectors, ``HH:MM:SS``, the zone key exactly as tzdata spells
it, ``at`` in UTC with ``Z``), so ``parse_cadence(c.to_payload()) == c`` always holds
and the payload is stable input to content hashes.

The payload carries its kind: ``{"kind": "DAILY", "local_time": "09:00:00",
"timezone": "Europe/Paris"}``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time
from enum import StrEnum
from typing import Any, ClassVar

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.zones import is_zone

NOT_AN_OBJECT = reason("schedule.cadence.not_an_object", "The cadence payload is not a JSON object")
UNKNOWN_KIND = reason(
    "schedule.cadence.unknown_kind",
    "The cadence kind is not ONCE, DAILY, WEEKLY, MONTHLY or YEARLY",
)
UNKNOWN_FIELD = reason(
    "schedule.cadence.unknown_field", "The cadence payload has a field its kind does not define"
)
MISSING_FIELD = reason(
    "schedule.cadence.missing_field", "The cadence payload lacks a field its kind requires"
)
INVALID_TYPE = reason("schedule.cadence.invalid_type", "A cadence field has the wrong JSON type")
INVALID_INSTANT = reason(
    "schedule.cadence.invalid_instant", "The ONCE 'at' value is not an RFC 3339 timestamp"
)
NAIVE_INSTANT = reason(
    "schedule.cadence.naive_instant", "The ONCE 'at' timestamp has no UTC offset"
)
INVALID_TIMEZONE = reason(
    "schedule.cadence.invalid_timezone", "The timezone is not an IANA zone key shipped by tzdata"
)
INVALID_LOCAL_TIME = reason(
    "schedule.cadence.invalid_local_time", "local_time is not a wall time HH:MM or HH:MM:SS"
)
WEEKDAYS_EMPTY = reason("schedule.cadence.weekdays_empty", "A WEEKLY cadence selects no weekday")
WEEKDAY_OUT_OF_RANGE = reason(
    "schedule.cadence.weekday_out_of_range", "A weekday is outside ISO 1 (Monday) .. 7 (Sunday)"
)
WEEKDAY_DUPLICATE = reason("schedule.cadence.weekday_duplicate", "A weekday is listed twice")
DAY_OUT_OF_RANGE = reason(
    "schedule.cadence.day_out_of_range", "A monthly day of month is outside 1..31"
)
DAY_DUPLICATE = reason("schedule.cadence.day_duplicate", "A monthly day of month is listed twice")
MONTHLY_EMPTY = reason(
    "schedule.cadence.monthly_selector_empty",
    "A MONTHLY cadence selects no numbered day and not the last day",
)
YEARLY_EMPTY = reason("schedule.cadence.yearly_selector_empty", "A YEARLY cadence selects no date")
MONTH_OUT_OF_RANGE = reason(
    "schedule.cadence.month_out_of_range", "A yearly month is outside 1..12"
)
YEARLY_DAY_OUT_OF_RANGE = reason(
    "schedule.cadence.yearly_day_out_of_range", "A yearly day is outside 1..31"
)
YEARLY_DATE_IMPOSSIBLE = reason(
    "schedule.cadence.yearly_date_impossible",
    "A yearly month/day pair exists in no Gregorian year (e.g. April 31, February 30)",
)
YEARLY_DATE_DUPLICATE = reason(
    "schedule.cadence.yearly_date_duplicate", "A yearly month/day pair is listed twice"
)


class CadenceKind(StrEnum):
    ONCE = "ONCE"
    DAILY = "DAILY"
    WEEKLY = "WEEKLY"
    MONTHLY = "MONTHLY"
    YEARLY = "YEARLY"


_LOCAL_TIME = re.compile(r"^([01][0-9]|2[0-3]):([0-5][0-9])(?::([0-5][0-9]))?$")


def _fail(code: str, message: str, **details: Any) -> ValidationError:
    return ValidationError(code, message, details)


def _as_int(value: object, field: str) -> int:
    # bool is an int in Python, never in a cadence.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(INVALID_TYPE, f"{field} must be an integer", field=field)
    return value


def _as_list(value: object, field: str) -> list[object]:
    if not isinstance(value, list | tuple):
        raise _fail(INVALID_TYPE, f"{field} must be a list", field=field)
    return list(value)


def parse_local_time(value: object) -> time:
    """A wall time from ``HH:MM`` or ``HH:MM:SS`` (24-hour, no leap second)."""
    if isinstance(value, time):
        if value.tzinfo is not None or value.microsecond or value.fold:
            raise _fail(INVALID_LOCAL_TIME, "local_time must be a plain wall time to the second")
        return value
    if not isinstance(value, str):
        raise _fail(INVALID_TYPE, "local_time must be a string", field="local_time")
    match = _LOCAL_TIME.match(value)
    if match is None:
        raise _fail(INVALID_LOCAL_TIME, "local_time must be HH:MM or HH:MM:SS")
    return time(int(match[1]), int(match[2]), int(match[3] or 0))


def _timezone(value: object) -> str:
    if not isinstance(value, str):
        raise _fail(INVALID_TYPE, "timezone must be a string", field="timezone")
    if not is_zone(value):
        raise _fail(INVALID_TIMEZONE, "timezone is not an IANA zone key known to tzdata")
    return value


def format_instant(value: datetime) -> str:
    """Canonical RFC 3339 text of an aware instant: UTC, ``Z``, microseconds only if any."""
    utc = value.astimezone(UTC)
    if utc.year >= 1000:
        # The same text as below (``isoformat`` also prints microseconds only if any),
        # at half the cost: a materialization formats five instants (ADR 2460). Before
        # year 1000, ``%Y`` is not zero-padded while ``isoformat`` is.
        return utc.isoformat()[:-6] + "Z"
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}"
    return text + "Z"


def _instant(value: object) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        # RFC 3339 requires a time part; fromisoformat would also accept a bare date.
        if "T" not in value.upper():
            raise _fail(INVALID_INSTANT, "at must be an RFC 3339 timestamp")
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _fail(INVALID_INSTANT, "at must be an RFC 3339 timestamp") from None
    else:
        raise _fail(INVALID_TYPE, "at must be a string", field="at")
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise _fail(NAIVE_INSTANT, "at must carry a UTC offset")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first UTC instant
        raise _fail(INVALID_INSTANT, "at is outside the representable range") from None


class _Base:
    __slots__ = ()
    kind: ClassVar[CadenceKind]

    def to_payload(self) -> dict[str, Any]:  # pragma: no cover - every kind overrides
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class OnceCadence(_Base):
    """One aware UTC instant."""

    at: datetime
    kind: ClassVar[CadenceKind] = CadenceKind.ONCE

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", _instant(self.at))

    @property
    def timezone(self) -> None:
        return None

    def to_payload(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "at": format_instant(self.at)}


@dataclass(frozen=True, slots=True)
class _Civil(_Base):
    local_time: time
    timezone: str

    def _civil_payload(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "local_time": self.local_time.strftime("%H:%M:%S"),
            "timezone": self.timezone,
        }

    def _check_civil(self) -> None:
        object.__setattr__(self, "local_time", parse_local_time(self.local_time))
        object.__setattr__(self, "timezone", _timezone(self.timezone))


@dataclass(frozen=True, slots=True)
class DailyCadence(_Civil):
    """Every local day at ``local_time``."""

    kind: ClassVar[CadenceKind] = CadenceKind.DAILY

    def __post_init__(self) -> None:
        self._check_civil()

    def to_payload(self) -> dict[str, Any]:
        return self._civil_payload()


@dataclass(frozen=True, slots=True)
class WeeklyCadence(_Civil):
    """ISO weekdays (1 = Monday .. 7 = Sunday) at ``local_time``."""

    weekdays: tuple[int, ...]
    kind: ClassVar[CadenceKind] = CadenceKind.WEEKLY

    def __post_init__(self) -> None:
        self._check_civil()
        days = [_as_int(d, "weekdays") for d in _as_list(self.weekdays, "weekdays")]
        if not days:
            raise _fail(WEEKDAYS_EMPTY, "weekdays must select at least one day")
        if any(not 1 <= d <= 7 for d in days):
            raise _fail(WEEKDAY_OUT_OF_RANGE, "weekdays must be ISO weekdays 1..7")
        if len(set(days)) != len(days):
            raise _fail(WEEKDAY_DUPLICATE, "weekdays must be unique")
        object.__setattr__(self, "weekdays", tuple(sorted(days)))

    def to_payload(self) -> dict[str, Any]:
        return {**self._civil_payload(), "weekdays": list(self.weekdays)}


@dataclass(frozen=True, slots=True)
class MonthlyCadence(_Civil):
    """Numbered days of each month (absent days skipped) and/or each month's last day."""

    days_of_month: tuple[int, ...] = ()
    last_day: bool = False
    kind: ClassVar[CadenceKind] = CadenceKind.MONTHLY

    def __post_init__(self) -> None:
        self._check_civil()
        days = [_as_int(d, "days_of_month") for d in _as_list(self.days_of_month, "days_of_month")]
        if not isinstance(self.last_day, bool):
            raise _fail(INVALID_TYPE, "last_day must be a boolean", field="last_day")
        if any(not 1 <= d <= 31 for d in days):
            raise _fail(DAY_OUT_OF_RANGE, "days_of_month must be within 1..31")
        if len(set(days)) != len(days):
            raise _fail(DAY_DUPLICATE, "days_of_month must be unique")
        if not days and not self.last_day:
            raise _fail(MONTHLY_EMPTY, "select at least one day of month or last_day")
        object.__setattr__(self, "days_of_month", tuple(sorted(days)))

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._civil_payload(),
            "days_of_month": list(self.days_of_month),
            "last_day": self.last_day,
        }


@dataclass(frozen=True, slots=True, order=True)
class MonthDay:
    """A yearly selector; February 29 is valid and fires only in leap years."""

    month: int
    day: int

    def __post_init__(self) -> None:
        month = _as_int(self.month, "dates.month")
        day = _as_int(self.day, "dates.day")
        if not 1 <= month <= 12:
            raise _fail(MONTH_OUT_OF_RANGE, "month must be within 1..12")
        if not 1 <= day <= 31:
            raise _fail(YEARLY_DAY_OUT_OF_RANGE, "day must be within 1..31")
        # 2000 is a leap year, so this is the longest the month ever is.
        if day > calendar.monthrange(2000, month)[1]:
            raise _fail(YEARLY_DATE_IMPOSSIBLE, "this month/day exists in no year")


@dataclass(frozen=True, slots=True)
class YearlyCadence(_Civil):
    """Month/day pairs each year at ``local_time``."""

    dates: tuple[MonthDay, ...]
    kind: ClassVar[CadenceKind] = CadenceKind.YEARLY

    def __post_init__(self) -> None:
        self._check_civil()
        pairs = [_month_day(item) for item in _as_list(self.dates, "dates")]
        if not pairs:
            raise _fail(YEARLY_EMPTY, "dates must select at least one month/day")
        if len(set(pairs)) != len(pairs):
            raise _fail(YEARLY_DATE_DUPLICATE, "dates must be unique")
        object.__setattr__(self, "dates", tuple(sorted(pairs)))

    def to_payload(self) -> dict[str, Any]:
        return {
            **self._civil_payload(),
            "dates": [{"month": d.month, "day": d.day} for d in self.dates],
        }


def _month_day(item: object) -> MonthDay:
    if isinstance(item, MonthDay):
        return item
    if not isinstance(item, Mapping):
        raise _fail(INVALID_TYPE, "each date must be an object {month, day}", field="dates")
    extra = set(item) - {"month", "day"}
    if extra:
        raise _fail(UNKNOWN_FIELD, "a date has only month and day", fields=sorted(map(str, extra)))
    for name in ("month", "day"):
        if name not in item:
            raise _fail(MISSING_FIELD, f"a date needs {name}", field=f"dates.{name}")
    return MonthDay(item["month"], item["day"])


Cadence = OnceCadence | DailyCadence | WeeklyCadence | MonthlyCadence | YearlyCadence
CivilCadence = DailyCadence | WeeklyCadence | MonthlyCadence | YearlyCadence

_FIELDS: dict[CadenceKind, tuple[frozenset[str], frozenset[str]]] = {
    # kind: (required, optional)
    CadenceKind.ONCE: (frozenset({"at"}), frozenset()),
    CadenceKind.DAILY: (frozenset({"local_time", "timezone"}), frozenset()),
    CadenceKind.WEEKLY: (frozenset({"local_time", "timezone", "weekdays"}), frozenset()),
    CadenceKind.MONTHLY: (
        frozenset({"local_time", "timezone"}),
        frozenset({"days_of_month", "last_day"}),
    ),
    CadenceKind.YEARLY: (frozenset({"local_time", "timezone", "dates"}), frozenset()),
}


def parse_cadence(payload: object) -> Cadence:
    """The canonical ``Cadence`` of a payload, or ``ValidationError`` with a stable code."""
    if isinstance(payload, OnceCadence | DailyCadence | WeeklyCadence | MonthlyCadence):
        return payload
    if isinstance(payload, YearlyCadence):
        return payload
    if not isinstance(payload, Mapping):
        raise _fail(NOT_AN_OBJECT, "cadence must be a JSON object")
    raw_kind = payload.get("kind")
    if raw_kind is None:
        raise _fail(MISSING_FIELD, "cadence needs a kind", field="kind")
    if not isinstance(raw_kind, str) or raw_kind not in CadenceKind.__members__:
        raise _fail(UNKNOWN_KIND, "cadence kind must be ONCE, DAILY, WEEKLY, MONTHLY or YEARLY")
    kind = CadenceKind(raw_kind)
    required, optional = _FIELDS[kind]
    fields = {str(k): v for k, v in payload.items() if k != "kind"}
    unknown = set(fields) - required - optional
    if unknown:
        raise _fail(UNKNOWN_FIELD, f"{kind} does not define these fields", fields=sorted(unknown))
    missing = required - set(fields)
    if missing:
        raise _fail(MISSING_FIELD, f"{kind} requires these fields", fields=sorted(missing))
    if kind is CadenceKind.ONCE:
        return OnceCadence(fields["at"])
    local_time = parse_local_time(fields["local_time"])
    zone = _timezone(fields["timezone"])
    if kind is CadenceKind.DAILY:
        return DailyCadence(local_time, zone)
    if kind is CadenceKind.WEEKLY:
        return WeeklyCadence(local_time, zone, tuple(_as_list(fields["weekdays"], "weekdays")))  # type: ignore[arg-type]
    if kind is CadenceKind.MONTHLY:
        days = tuple(_as_list(fields.get("days_of_month", []), "days_of_month"))
        return MonthlyCadence(local_time, zone, days, fields.get("last_day", False))  # type: ignore[arg-type]
    return YearlyCadence(local_time, zone, tuple(_as_list(fields["dates"], "dates")))  # type: ignore[arg-type]


def to_payload(cadence: Cadence) -> dict[str, Any]:
    """The canonical JSON payload of ``cadence`` (same as ``cadence.to_payload()``)."""
    return cadence.to_payload()
