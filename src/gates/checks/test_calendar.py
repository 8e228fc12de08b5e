"""gate.schedule.calendar_values and gate.schedule.calendar_recurrence (M20).

calendar_values: generated payloads, each either valid (in non-canonical spellings) or
valid-but-for-one-defect. A valid one must parse to the independently computed
canonical form and round-trip without drift; a defective one must fail with the one
stable code its defect maps to.

calendar_recurrence: monthly and yearly cadences against the slow oracle at real
transitions, plus the calendar facts (absent days skipped, last_day the real month
end, February 29 only in leap years, a date selected twice fires once).
"""

from __future__ import annotations

import calendar as pycalendar
import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gates.checks.recurrence_support import (
    REAL,
    ZONES,
    Tally,
    aims,
    assert_count,
    assert_next_and_latest,
    assert_sequence,
    civil_cadences,
    oracle_instants,
    reproduction,
)
from gates.pytest_plugin import GateEvidence
from scheduling import parse_cadence
from scheduling.domain import cadence as cad
from scheduling.domain.canonical import canonical_json
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import all_reasons
from scheduling.recurrence import count_inclusive, upcoming

VALUES = "gate.schedule.calendar_values"
RECURRENCE = "gate.schedule.calendar_recurrence"

Payload = dict[str, Any]

# ------------------------------------------------------------ valid payloads


@st.composite
def local_times(draw: Any) -> tuple[str, str]:
    """(as written, canonical HH:MM:SS)."""
    h, m, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    if draw(st.booleans()) and s == 0:
        return f"{h:02d}:{m:02d}", f"{h:02d}:{m:02d}:00"
    return f"{h:02d}:{m:02d}:{s:02d}", f"{h:02d}:{m:02d}:{s:02d}"


ALL_KINDS = ("ONCE", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")
_POSSIBLE = [
    (m, d) for m in range(1, 13) for d in range(1, 32) if d <= pycalendar.monthrange(2000, m)[1]
]


@st.composite
def valid_payloads(draw: Any, kinds: tuple[str, ...] = ALL_KINDS) -> tuple[Payload, Payload]:
    """(payload as a client might write it, the canonical payload expected back)."""
    kind = draw(st.sampled_from(kinds))
    if kind == "ONCE":
        utc = datetime(2000, 1, 1, tzinfo=UTC) + timedelta(
            seconds=draw(st.integers(0, 60 * 365 * 86400))
        )
        offset = timedelta(minutes=draw(st.integers(-14 * 4, 14 * 4)) * 15)
        written = utc.astimezone(__import__("datetime").timezone(offset)).isoformat()
        return {"kind": kind, "at": written}, {
            "kind": kind,
            "at": utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    written_time, canonical_time = draw(local_times())
    zone = draw(st.sampled_from(ZONES))
    payload: Payload = {"kind": kind, "local_time": written_time, "timezone": zone}
    canonical: Payload = {"kind": kind, "local_time": canonical_time, "timezone": zone}
    if kind == "WEEKLY":
        days = draw(st.lists(st.integers(1, 7), min_size=1, max_size=7, unique=True))
        payload["weekdays"], canonical["weekdays"] = days, sorted(days)
    elif kind == "MONTHLY":
        days = draw(st.lists(st.integers(1, 31), max_size=6, unique=True))
        last = draw(st.booleans()) if days else True
        payload["days_of_month"], canonical["days_of_month"] = days, sorted(days)
        payload["last_day"], canonical["last_day"] = last, last
    elif kind == "YEARLY":
        pairs = draw(st.lists(st.sampled_from(_POSSIBLE), min_size=1, max_size=5, unique=True))
        payload["dates"] = [{"month": m, "day": d} for m, d in pairs]
        canonical["dates"] = [{"month": m, "day": d} for m, d in sorted(pairs)]
    return payload, canonical


# ------------------------------------------------------------- one defect each

Mutation = Callable[[Payload, Any], tuple[Any, str] | None]
_KINDS: dict[Mutation, tuple[str, ...]] = {}


def mutation_kinds(mutation: Mutation) -> tuple[str, ...]:
    """The kinds a mutation applies to (it returns None for the others)."""
    return _KINDS.get(mutation, ALL_KINDS)


def _set(field: str, values: list[Any], code: str, kinds: tuple[str, ...]) -> Mutation:
    def mutate(p: Payload, draw: Any) -> tuple[Any, str] | None:
        if p["kind"] not in kinds:
            return None
        return {**p, field: draw(st.sampled_from(values))}, code

    _KINDS[mutate] = kinds
    return mutate


def _unknown_field(p: Payload, draw: Any) -> tuple[Any, str] | None:
    name = draw(st.sampled_from(["interval", "cron", "Timezone", "at_local", "every"]))
    return {**p, name: 1}, cad.UNKNOWN_FIELD


def _missing_field(p: Payload, draw: Any) -> tuple[Any, str] | None:
    optional = {"days_of_month", "last_day"}
    required = [k for k in p if k != "kind" and k not in optional]
    name = draw(st.sampled_from(required))
    return {k: v for k, v in p.items() if k != name}, cad.MISSING_FIELD


def _bad_kind(p: Payload, draw: Any) -> tuple[Any, str] | None:
    return {
        **p,
        "kind": draw(st.sampled_from(["HOURLY", "daily", "CRON", "", 3])),
    }, cad.UNKNOWN_KIND


def _not_object(p: Payload, draw: Any) -> tuple[Any, str] | None:
    return draw(st.sampled_from([[p], "DAILY", None, 7])), cad.NOT_AN_OBJECT


def _monthly_empty(p: Payload, draw: Any) -> tuple[Any, str] | None:
    if p["kind"] != "MONTHLY":
        return None
    return {**p, "days_of_month": [], "last_day": False}, cad.MONTHLY_EMPTY


def _duplicate(field: str, code: str, kind: str) -> Mutation:
    def mutate(p: Payload, draw: Any) -> tuple[Any, str] | None:
        if p["kind"] != kind or not p.get(field):
            return None
        items = list(p[field])
        return {**p, field: [*items, items[0]]}, code

    _KINDS[mutate] = (kind,)
    return mutate


def _date_item(values: list[Any], code: str) -> Mutation:
    def mutate(p: Payload, draw: Any) -> tuple[Any, str] | None:
        if p["kind"] != "YEARLY":
            return None
        return {**p, "dates": [*p["dates"], draw(st.sampled_from(values))]}, code

    _KINDS[mutate] = ("YEARLY",)
    return mutate


CIVIL = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
_KINDS[_monthly_empty] = ("MONTHLY",)
MUTATIONS: list[Mutation] = [
    _unknown_field,
    _missing_field,
    _bad_kind,
    _not_object,
    _set("at", ["2026-03-08T02:30:00", "2026-03-08T02:30"], cad.NAIVE_INSTANT, ("ONCE",)),
    _set(
        "at", ["tomorrow", "2026-13-01T00:00:00Z", "2026-03-08", ""], cad.INVALID_INSTANT, ("ONCE",)
    ),
    _set("at", [1767225600, None], cad.INVALID_TYPE, ("ONCE",)),
    _set(
        "timezone",
        ["Mars/Olympus", "america/new_york", "", "EST5EDT ", "Factory", "+05:00"],
        cad.INVALID_TIMEZONE,
        CIVIL,
    ),
    _set("timezone", [None, 5], cad.INVALID_TYPE, CIVIL),
    _set(
        "local_time",
        ["24:00", "9:00", "09:60", "09:00:60", "0900", "09:00:00.5", "", "09:00Z"],
        cad.INVALID_LOCAL_TIME,
        CIVIL,
    ),
    _set("local_time", [900, None], cad.INVALID_TYPE, CIVIL),
    _set("weekdays", [[]], cad.WEEKDAYS_EMPTY, ("WEEKLY",)),
    _set("weekdays", [[0], [8], [1, -1]], cad.WEEKDAY_OUT_OF_RANGE, ("WEEKLY",)),
    _set("weekdays", [[True], ["1"], "1", [1.0]], cad.INVALID_TYPE, ("WEEKLY",)),
    _duplicate("weekdays", cad.WEEKDAY_DUPLICATE, "WEEKLY"),
    _set("days_of_month", [[0], [32], [1, 40]], cad.DAY_OUT_OF_RANGE, ("MONTHLY",)),
    _duplicate("days_of_month", cad.DAY_DUPLICATE, "MONTHLY"),
    _monthly_empty,
    _set("last_day", ["yes", 1, None], cad.INVALID_TYPE, ("MONTHLY",)),
    _set("dates", [[]], cad.YEARLY_EMPTY, ("YEARLY",)),
    _date_item([{"month": 13, "day": 1}, {"month": 0, "day": 1}], cad.MONTH_OUT_OF_RANGE),
    _date_item([{"month": 1, "day": 0}, {"month": 1, "day": 32}], cad.YEARLY_DAY_OUT_OF_RANGE),
    _date_item(
        [
            {"month": m, "day": d}
            for m, d in ((4, 31), (2, 30), (2, 31), (6, 31), (9, 31), (11, 31))
        ],
        cad.YEARLY_DATE_IMPOSSIBLE,
    ),
    _date_item([{"month": 1, "day": 1, "year": 2026}], cad.UNKNOWN_FIELD),
    _date_item([{"month": 1}], cad.MISSING_FIELD),
    _duplicate("dates", cad.YEARLY_DATE_DUPLICATE, "YEARLY"),
]


@pytest.mark.gate(VALUES)
def test_values_are_closed_canonical_and_round_trip(gate_evidence: GateEvidence) -> None:
    registered = all_reasons()
    accepted: dict[str, int] = {}
    rejected: dict[str, int] = {}

    @given(valid_payloads())
    def valid_values(case: tuple[Payload, Payload]) -> None:
        payload, canonical = case
        value = parse_cadence(payload)
        assert value.to_payload() == canonical
        again = parse_cadence(json.loads(canonical_json(value.to_payload())))
        assert again == value
        assert again.to_payload() == canonical
        accepted[payload["kind"]] = accepted.get(payload["kind"], 0) + 1

    @given(st.data())
    def defective_values(data: st.DataObject) -> None:
        mutation = data.draw(st.sampled_from(MUTATIONS))
        payload, _ = data.draw(valid_payloads(mutation_kinds(mutation)))
        outcome = mutation(payload, data.draw)
        assume(outcome is not None)  # e.g. no selector to duplicate in this payload
        assert outcome is not None
        bad, code = outcome
        assert code in registered
        with pytest.raises(ValidationError) as caught:
            parse_cadence(bad)
        assert caught.value.code == code, f"{bad!r}: {caught.value.code} != {code}"
        rejected[code] = rejected.get(code, 0) + 1

    valid_values()
    defective_values()
    gate_evidence.record("accepted_by_kind", dict(sorted(accepted.items())))
    gate_evidence.record("rejected_by_code", dict(sorted(rejected.items())))
    gate_evidence.record("reproduction", reproduction())
    if len(accepted) < 5 or len(rejected) < 8:
        gate_evidence.not_covered("too few kinds accepted or defects rejected")


# ------------------------------------------------------------------ recurrence


@pytest.mark.gate(RECURRENCE)
def test_monthly_and_yearly_match_the_oracle_at_real_transitions(
    gate_evidence: GateEvidence,
) -> None:
    tally = Tally()

    @given(st.data())
    def property_(data: st.DataObject) -> None:
        aim = data.draw(aims())
        cadence = data.draw(civil_cadences(aim, ("MONTHLY", "YEARLY")))
        tally.note(aim, type(cadence).__name__)
        assert_next_and_latest(REAL, cadence, aim.reference)
        assert_sequence(REAL, cadence, aim.reference, 6)
        end = aim.reference + timedelta(days=data.draw(st.integers(0, 800)))
        assert_count(REAL, cadence, aim.reference, end)

    property_()
    gate_evidence.record("generated", tally.evidence())
    gate_evidence.record("reproduction", reproduction())


def _local_dates(payload: Payload, start: datetime, end: datetime) -> list[date]:
    cadence = parse_cadence(payload)
    firings = upcoming(cadence, start, 10_000)
    return [f.local_date for f in firings if f.instant <= end]


@pytest.mark.gate(RECURRENCE)
def test_calendar_facts(gate_evidence: GateEvidence) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2029, 1, 1, tzinfo=UTC)
    base = {"local_time": "09:00", "timezone": "America/New_York"}
    # A numbered day absent from a month is skipped: the 31st fires in 7 months a year.
    on_31 = _local_dates({"kind": "MONTHLY", **base, "days_of_month": [31]}, start, end)
    assert all(d.day == 31 for d in on_31)
    assert len(on_31) == 7 * 5
    # last_day is each month's real last day, leap Februaries included.
    last = _local_dates({"kind": "MONTHLY", **base, "last_day": True}, start, end)
    assert last == [
        date(y, m, pycalendar.monthrange(y, m)[1]) for y in range(2024, 2029) for m in range(1, 13)
    ]
    # Selected twice (the 28th..31st and last_day) fires once per date.
    both = _local_dates(
        {"kind": "MONTHLY", **base, "days_of_month": [28, 29, 30, 31], "last_day": True}, start, end
    )
    assert len(both) == len(set(both))
    assert [d for d in both if d.month == 2] == [
        date(2024, 2, 28),
        date(2024, 2, 29),
        date(2025, 2, 28),
        date(2026, 2, 28),
        date(2027, 2, 28),
        date(2028, 2, 28),
        date(2028, 2, 29),
    ]
    # February 29 only in leap years, and 2100 is not one.
    feb29 = parse_cadence({"kind": "YEARLY", **base, "dates": [{"month": 2, "day": 29}]})
    century = [f.local_date.year for f in upcoming(feb29, datetime(2090, 1, 1, tzinfo=UTC), 5)]
    assert century == [2092, 2096, 2104, 2108, 2112]
    span = (datetime(1896, 1, 1, tzinfo=UTC), datetime(2104, 12, 31, tzinfo=UTC))
    leap_years = sum(pycalendar.isleap(y) for y in range(1896, 2105))
    assert count_inclusive(feb29, *span) == leap_years
    # The same facts against the oracle's day-by-day enumeration.
    monthly = parse_cadence(
        {"kind": "MONTHLY", **base, "days_of_month": [29, 30, 31], "last_day": True}
    )
    expected = oracle_instants(monthly, date(2023, 12, 30), date(2029, 1, 2))
    got = [f.instant for f in upcoming(monthly, start, len(expected) + 5) if f.instant <= end]
    assert got == [n for n in expected if start < n <= end]
    gate_evidence.record(
        "facts",
        {
            "monthly_31st_2024_2028": len(on_31),
            "last_day_months": len(last),
            "double_selected_dates": len(both),
            "feb29_years_after_2090": century,
            "feb29_count_1896_2104": leap_years,
        },
    )
