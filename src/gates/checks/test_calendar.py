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
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gates.checks.aimed_cases import AimedCase, aimed_cases
from gates.checks.recurrence_support import (
    REAL,
    RULE_NAMES,
    ZONES,
    Aim,
    Tally,
    aims,
    assert_count,
    assert_next_and_latest,
    assert_resolution_on,
    assert_sequence,
    civil_cadences,
    oracle_instants,
    previous_occurrence,
    reproduction,
    transition_aims,
)
from gates.runner.pytest_plugin import GateEvidence
from scheduling import parse_cadence
from scheduling.domain import cadence as cad
from scheduling.domain.cadence import CivilCadence
from scheduling.domain.canonical import canonical_json
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import all_reasons
from scheduling.recurrence import count_inclusive, first_at_or_after, next_firing, upcoming
from scheduling.tzdata_info import tzdata_version

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
        written = utc.astimezone(timezone(offset)).isoformat()
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

Parser = Callable[[Any], Any]


@dataclass(frozen=True)
class Defect:
    """One way to spoil a valid payload, and the one stable code it must be rejected with.

    ``apply(payload, variant)`` returns the spoiled payload, or None when the defect does
    not apply to that payload (e.g. no selector to duplicate)."""

    name: str
    code: str
    kinds: tuple[str, ...]
    variants: tuple[Any, ...]
    apply: Callable[[Payload, Any], Any]


CIVIL = ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")


def _setter(field_name: str) -> Callable[[Payload, Any], Any]:
    return lambda p, v: {**p, field_name: v}


def _drop(p: Payload, name: Any) -> Any:
    return {k: v for k, v in p.items() if k != name} if name in p else None


def _duplicate(field_name: str) -> Callable[[Payload, Any], Any]:
    def apply(p: Payload, index: Any) -> Any:
        items = list(p.get(field_name) or [])
        return {**p, field_name: [*items, items[index]]} if items else None

    return apply


def _add_date(p: Payload, item: Any) -> Any:
    return {**p, "dates": [*p["dates"], item]}


def _monthly_empty(p: Payload, spelling: Any) -> Any:
    cleared = {k: v for k, v in p.items() if k not in ("days_of_month", "last_day")}
    return {**cleared, **spelling}


_MISSING = ("kind", "at", "local_time", "timezone", "weekdays", "dates")

DEFECTS: tuple[Defect, ...] = (
    Defect(
        "unknown_field",
        cad.UNKNOWN_FIELD,
        ALL_KINDS,
        ("interval", "cron", "Timezone", "at_local", "every"),
        lambda p, name: {**p, name: 1},
    ),
    Defect("missing_field", cad.MISSING_FIELD, ALL_KINDS, _MISSING, _drop),
    Defect(
        "unknown_kind",
        cad.UNKNOWN_KIND,
        ALL_KINDS,
        ("HOURLY", "daily", "CRON", "", 3),
        _setter("kind"),
    ),
    Defect(
        "not_an_object",
        cad.NOT_AN_OBJECT,
        ALL_KINDS,
        ("list", "DAILY", None, 7),
        lambda p, v: [p] if v == "list" else v,
    ),
    Defect(
        "naive_instant",
        cad.NAIVE_INSTANT,
        ("ONCE",),
        ("2026-03-08T02:30:00", "2026-03-08T02:30"),
        _setter("at"),
    ),
    Defect(
        "invalid_instant",
        cad.INVALID_INSTANT,
        ("ONCE",),
        ("tomorrow", "2026-13-01T00:00:00Z", "2026-03-08", ""),
        _setter("at"),
    ),
    Defect("at_wrong_type", cad.INVALID_TYPE, ("ONCE",), (1767225600, None), _setter("at")),
    Defect(
        "invalid_timezone",
        cad.INVALID_TIMEZONE,
        CIVIL,
        ("Mars/Olympus", "america/new_york", "", "EST5EDT ", "Factory", "+05:00"),
        _setter("timezone"),
    ),
    Defect("timezone_wrong_type", cad.INVALID_TYPE, CIVIL, (None, 5), _setter("timezone")),
    Defect(
        "invalid_local_time",
        cad.INVALID_LOCAL_TIME,
        CIVIL,
        ("24:00", "9:00", "09:60", "09:00:60", "0900", "09:00:00.5", "", "09:00Z"),
        _setter("local_time"),
    ),
    Defect("local_time_wrong_type", cad.INVALID_TYPE, CIVIL, (900, None), _setter("local_time")),
    Defect("weekdays_empty", cad.WEEKDAYS_EMPTY, ("WEEKLY",), ([],), _setter("weekdays")),
    Defect(
        "weekday_out_of_range",
        cad.WEEKDAY_OUT_OF_RANGE,
        ("WEEKLY",),
        ([0], [8], [1, -1]),
        _setter("weekdays"),
    ),
    Defect(
        "weekday_wrong_type",
        cad.INVALID_TYPE,
        ("WEEKLY",),
        ([True], ["1"], "1", [1.0]),
        _setter("weekdays"),
    ),
    Defect(
        "weekday_duplicate", cad.WEEKDAY_DUPLICATE, ("WEEKLY",), (0, -1), _duplicate("weekdays")
    ),
    Defect(
        "day_out_of_range",
        cad.DAY_OUT_OF_RANGE,
        ("MONTHLY",),
        ([0], [32], [1, 40]),
        _setter("days_of_month"),
    ),
    Defect(
        "day_wrong_type",
        cad.INVALID_TYPE,
        ("MONTHLY",),
        ([True], ["1"], 1, [1.5]),
        _setter("days_of_month"),
    ),
    Defect("day_duplicate", cad.DAY_DUPLICATE, ("MONTHLY",), (0, -1), _duplicate("days_of_month")),
    Defect(
        "monthly_selector_empty",
        cad.MONTHLY_EMPTY,
        ("MONTHLY",),
        ({}, {"days_of_month": []}, {"last_day": False}, {"days_of_month": [], "last_day": False}),
        _monthly_empty,
    ),
    Defect(
        "last_day_wrong_type", cad.INVALID_TYPE, ("MONTHLY",), ("yes", 1, None), _setter("last_day")
    ),
    Defect("yearly_selector_empty", cad.YEARLY_EMPTY, ("YEARLY",), ([],), _setter("dates")),
    Defect(
        "dates_wrong_type",
        cad.INVALID_TYPE,
        ("YEARLY",),
        ("02-29", [[2, 29]], [{"month": "2", "day": 29}]),
        _setter("dates"),
    ),
    Defect(
        "month_out_of_range",
        cad.MONTH_OUT_OF_RANGE,
        ("YEARLY",),
        ({"month": 13, "day": 1}, {"month": 0, "day": 1}),
        _add_date,
    ),
    Defect(
        "yearly_day_out_of_range",
        cad.YEARLY_DAY_OUT_OF_RANGE,
        ("YEARLY",),
        ({"month": 1, "day": 0}, {"month": 1, "day": 32}),
        _add_date,
    ),
    Defect(
        "yearly_date_impossible",
        cad.YEARLY_DATE_IMPOSSIBLE,
        ("YEARLY",),
        tuple(
            {"month": m, "day": d}
            for m, d in ((2, 30), (2, 31), (4, 31), (6, 31), (9, 31), (11, 31))
        ),
        _add_date,
    ),
    Defect(
        "date_unknown_field",
        cad.UNKNOWN_FIELD,
        ("YEARLY",),
        ({"month": 1, "day": 1, "year": 2026},),
        _add_date,
    ),
    Defect(
        "date_missing_field", cad.MISSING_FIELD, ("YEARLY",), ({"month": 1}, {"day": 1}), _add_date
    ),
    Defect(
        "yearly_date_duplicate",
        cad.YEARLY_DATE_DUPLICATE,
        ("YEARLY",),
        (0, -1),
        _duplicate("dates"),
    ),
)
DEFECT_CODES = frozenset(d.code for d in DEFECTS)

# Deterministic bases: every kind, with and without each optional selector.
BASES: tuple[Payload, ...] = (
    {"kind": "ONCE", "at": "2026-03-08T02:30:00-05:00"},
    {"kind": "DAILY", "local_time": "09:00", "timezone": "America/New_York"},
    {"kind": "WEEKLY", "local_time": "23:59:59", "timezone": "Asia/Kolkata", "weekdays": [5, 1, 3]},
    {
        "kind": "MONTHLY",
        "local_time": "02:30",
        "timezone": "Europe/London",
        "days_of_month": [31, 1, 15],
    },
    {
        "kind": "MONTHLY",
        "local_time": "00:00",
        "timezone": "UTC",
        "days_of_month": [],
        "last_day": True,
    },
    {
        "kind": "YEARLY",
        "local_time": "12:00",
        "timezone": "US/Eastern",
        "dates": [{"month": 12, "day": 31}, {"month": 2, "day": 29}],
    },
)

# Valid edge values and their exact canonical forms.
VALID_EDGES: tuple[tuple[Payload, Payload], ...] = (
    (
        {
            "kind": "YEARLY",
            "local_time": "07:05",
            "timezone": "Europe/Paris",
            "dates": [{"day": 29, "month": 2}],
        },
        {
            "kind": "YEARLY",
            "local_time": "07:05:00",
            "timezone": "Europe/Paris",
            "dates": [{"month": 2, "day": 29}],
        },
    ),
    (
        {
            "kind": "MONTHLY",
            "local_time": "23:00:00",
            "timezone": "America/Nuuk",
            "days_of_month": [31, 29, 30],
            "last_day": True,
        },
        {
            "kind": "MONTHLY",
            "local_time": "23:00:00",
            "timezone": "America/Nuuk",
            "days_of_month": [29, 30, 31],
            "last_day": True,
        },
    ),
    (
        {"kind": "MONTHLY", "local_time": "00:00", "timezone": "UTC", "last_day": True},
        {
            "kind": "MONTHLY",
            "local_time": "00:00:00",
            "timezone": "UTC",
            "days_of_month": [],
            "last_day": True,
        },
    ),
    (
        {"kind": "MONTHLY", "local_time": "00:00", "timezone": "UTC", "days_of_month": [1]},
        {
            "kind": "MONTHLY",
            "local_time": "00:00:00",
            "timezone": "UTC",
            "days_of_month": [1],
            "last_day": False,
        },
    ),
    (
        {
            "kind": "WEEKLY",
            "local_time": "00:00",
            "timezone": "US/Eastern",
            "weekdays": [7, 6, 5, 4, 3, 2, 1],
        },
        {
            "kind": "WEEKLY",
            "local_time": "00:00:00",
            "timezone": "US/Eastern",
            "weekdays": [1, 2, 3, 4, 5, 6, 7],
        },
    ),
    (
        {"kind": "ONCE", "at": "2026-03-08T02:30:00.250000+05:45"},
        {"kind": "ONCE", "at": "2026-03-07T20:45:00.250000Z"},
    ),
)


def check_valid(parse: Parser, payload: Payload, canonical: Payload) -> None:
    """A valid payload parses to its canonical form and round-trips without drift."""
    try:
        value = parse(payload)
    except ValidationError as exc:
        raise AssertionError(f"valid {payload!r} rejected with {exc.code}") from exc
    assert value.to_payload() == canonical, f"{payload!r}: {value.to_payload()} != {canonical}"
    again = parse(json.loads(canonical_json(value.to_payload())))
    assert again == value, f"{payload!r} drifted on a round trip: {again!r}"
    assert again.to_payload() == canonical


def check_defect(parse: Parser, defect: Defect, bad: Any) -> None:
    """A spoiled payload fails with exactly its defect's code."""
    try:
        value = parse(bad)
    except ValidationError as exc:
        code: str = exc.code
    else:
        raise AssertionError(f"{defect.name}: {bad!r} was accepted as {value!r}")
    assert code == defect.code, f"{defect.name}: {bad!r} -> {code}, not {defect.code}"


def explicit_defect_cases() -> list[tuple[Defect, Any]]:
    """Every defect, every variant, on every base payload it applies to."""
    cases = []
    for defect in DEFECTS:
        for base in BASES:
            if base["kind"] not in defect.kinds:
                continue
            for variant in defect.variants:
                bad = defect.apply(base, variant)
                if bad is not None:
                    cases.append((defect, bad))
    return cases


@dataclass
class ValuesCoverage:
    """What one run of the calendar_values check exercised."""

    accepted: dict[str, int] = field(default_factory=dict)
    explicit: dict[str, int] = field(default_factory=dict)
    generated: dict[str, int] = field(default_factory=dict)
    by_defect: dict[str, int] = field(default_factory=dict)
    generated_by_defect: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def bump(counts: dict[str, int], key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    def missing_codes(self) -> list[str]:
        seen = set(self.explicit) | set(self.generated)
        return sorted(DEFECT_CODES - seen)

    def defects_without_explicit_case(self) -> list[str]:
        return sorted(d.name for d in DEFECTS if not self.by_defect.get(d.name))

    def defects_never_generated(self) -> list[str]:
        return sorted(d.name for d in DEFECTS if not self.generated_by_defect.get(d.name))


def run_explicit(parse: Parser, coverage: ValuesCoverage) -> None:
    for payload, canonical in VALID_EDGES:
        check_valid(parse, payload, canonical)
        coverage.bump(coverage.accepted, payload["kind"])
    for defect, bad in explicit_defect_cases():
        check_defect(parse, defect, bad)
        coverage.bump(coverage.explicit, defect.code)
        coverage.bump(coverage.by_defect, defect.name)


def generated_valid(
    parse: Parser, coverage: ValuesCoverage, kinds: tuple[str, ...] = ALL_KINDS
) -> list[Callable[[], None]]:
    """One property per kind (the profile's examples shared out, at least 5 each), so
    every kind is accepted by construction whatever the seed; one property drawing the
    kind too left a kind to the luck of hypothesis's sampling (ADR 1300)."""
    profile = settings.default
    assert profile is not None  # the gate plugin loads a profile
    examples = max(5, profile.max_examples // len(kinds))

    def of_kind(kind: str) -> Callable[[], None]:
        @settings(max_examples=examples)
        @given(valid_payloads((kind,)))
        def valid_values(case: tuple[Payload, Payload]) -> None:
            check_valid(parse, *case)
            coverage.bump(coverage.accepted, case[0]["kind"])

        return valid_values

    return [of_kind(kind) for kind in kinds]


def values_shortfall(coverage: ValuesCoverage) -> str | None:
    """Why the cases did not cover the claim (None when they did)."""
    if set(coverage.accepted) != set(ALL_KINDS):
        return f"kinds never accepted: {set(ALL_KINDS) - set(coverage.accepted)}"
    return None


def generated_defects(
    parse: Parser, coverage: ValuesCoverage, pinned: settings | None = None
) -> list[Callable[[], None]]:
    """One property per defect (a tenth of the profile's examples each, at least 5): a
    generated valid payload spoiled by that defect. One property drawing the defect
    too would leave some defects to the luck of hypothesis's sampling."""
    profile = settings.default
    assert profile is not None  # the gate plugin loads a profile
    examples = max(5, profile.max_examples // 10)

    def spoiled_by(defect: Defect) -> Callable[[], None]:
        @(pinned or settings(max_examples=examples))
        @given(valid_payloads(defect.kinds), st.sampled_from(defect.variants))
        def defective_values(case: tuple[Payload, Payload], variant: Any) -> None:
            bad = defect.apply(case[0], variant)
            assume(bad is not None)  # e.g. no selector to duplicate in this payload
            check_defect(parse, defect, bad)
            coverage.bump(coverage.generated, defect.code)
            coverage.bump(coverage.generated_by_defect, defect.name)

        return defective_values

    return [spoiled_by(d) for d in DEFECTS]


@pytest.mark.gate(VALUES)
def test_values_are_closed_canonical_and_round_trip(gate_evidence: GateEvidence) -> None:
    registered = all_reasons()
    unregistered = sorted(c for c in DEFECT_CODES if c not in registered)
    assert not unregistered, f"defects expect unregistered codes: {unregistered}"
    coverage = ValuesCoverage()
    run_explicit(parse_cadence, coverage)
    for valid in generated_valid(parse_cadence, coverage):
        valid()
    for check in generated_defects(parse_cadence, coverage):
        check()
    gate_evidence.record("accepted_by_kind", dict(sorted(coverage.accepted.items())))
    gate_evidence.record("codes_expected", sorted(DEFECT_CODES))
    gate_evidence.record("rejected_explicit_by_code", dict(sorted(coverage.explicit.items())))
    gate_evidence.record("rejected_generated_by_code", dict(sorted(coverage.generated.items())))
    gate_evidence.record("explicit_cases_by_defect", dict(sorted(coverage.by_defect.items())))
    gate_evidence.record(
        "generated_cases_by_defect", dict(sorted(coverage.generated_by_defect.items()))
    )
    gate_evidence.record(
        "codes_missing_from_generated", sorted(DEFECT_CODES - set(coverage.generated))
    )
    gate_evidence.record("reproduction", reproduction())
    shortfall = values_shortfall(coverage)
    if shortfall:
        gate_evidence.not_covered(shortfall)
    gaps = {
        "codes never rejected": coverage.missing_codes(),
        "defects without an explicit case": coverage.defects_without_explicit_case(),
        "defects never generated": coverage.defects_never_generated(),
        "codes never rejected by a generated case": sorted(DEFECT_CODES - set(coverage.generated)),
    }
    if any(gaps.values()):
        gate_evidence.not_covered(f"{gaps}")


# ------------------------------------------------------------------ recurrence


CALENDAR_KINDS = ("MONTHLY", "YEARLY")
NEEDED_RULES = ("fold", "gap")


def _calendar_kind(cadence: CivilCadence) -> str:
    return str(cadence.kind.value)


def rules_never_hit(tally: Tally) -> list[str]:
    """The (kind, rule) pairs the generated cases never exercised: each calendar kind
    must have resolved at least one fold and one gap."""
    return [
        f"{kind} never hit {RULE_NAMES[rule]}"
        for kind in CALENDAR_KINDS
        for rule in NEEDED_RULES
        if not tally.by_kind.get(kind, {}).get(RULE_NAMES[rule])
    ]


def exercise(aim: Aim, cadence: CivilCadence, count_days: int, tally: Tally) -> None:
    """One case (aimed or generated): the rule its date needs against the oracle and the
    calculator's own explanation, then next / latest / sequence / count around it."""
    rule = assert_resolution_on(REAL, cadence, aim.day)
    if rule != "missing-date":
        firing = next_firing(cadence, previous_occurrence(cadence, aim.day))
        assert firing is not None
        assert firing.resolution.value == RULE_NAMES[rule], f"{firing.describe()} ({rule})"
    tally.note(aim, RULE_NAMES[rule], _calendar_kind(cadence))
    assert_next_and_latest(REAL, cadence, aim.reference)
    assert_sequence(REAL, cadence, aim.reference, 6)
    assert_count(REAL, cadence, aim.reference, aim.reference + timedelta(days=count_days))


# The aimed cases count across a little over a year, past the transition they aim at.
AIMED_COUNT_DAYS = 400


def run_recurrence_cases(
    aimed: list[AimedCase],
    tally: Tally,
    zones: list[str] | None = None,
    pinned: settings | None = None,
) -> None:
    """The aimed cases, then the generated ones (drawn from ``zones``, default all;
    ``pinned`` settings replace the profile's, for tests of the test)."""
    for case in aimed:
        exercise(case.aim, case.cadence, AIMED_COUNT_DAYS, tally)

    @(pinned or settings())
    @given(st.data())
    def property_(data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(["gap", "fold", "near"]), label="target")
        aim = data.draw(
            aims(zones) if target == "near" else transition_aims(target, zones), label="aim"
        )
        cadence = data.draw(civil_cadences(aim, CALENDAR_KINDS), label="cadence")
        exercise(aim, cadence, data.draw(st.integers(0, 800)), tally)

    property_()


@pytest.mark.gate(RECURRENCE)
def test_monthly_and_yearly_match_the_oracle_at_real_transitions(
    gate_evidence: GateEvidence,
) -> None:
    """Aimed cases first (MONTHLY and YEARLY x {gap, fold} in zones that have them, see
    ``aimed_cases``: the guard's target is reached in every run), then generated ones:
    each selects a local date (a third aimed inside a real gap, a third inside a real
    fold, a third anywhere near a transition), checks the rule that date needs against
    the oracle and the calculator's own explanation, then next / latest / sequence /
    count around the transition."""
    aimed = aimed_cases(CALENDAR_KINDS)
    tally = Tally()
    run_recurrence_cases(aimed, tally)
    gate_evidence.record("aimed_cases", [c.label() for c in aimed])
    # aim_spots "aimed-gap"/"aimed-fold" count the aimed cases; the rest were generated.
    gate_evidence.record("generated", tally.evidence())
    gate_evidence.record("tzdata", tzdata_version())
    gate_evidence.record("reproduction", reproduction())
    missing = rules_never_hit(tally)
    if missing:
        gate_evidence.not_covered("; ".join(missing))


# (cadence, local date, expected UTC instant, rule): month ends and yearly dates that
# fall on a real transition, each checked by hand against the zone's published rules.
_LONDON = {"local_time": "01:30", "timezone": "Europe/London"}
_NEW_YORK = {"timezone": "America/New_York"}
CALENDAR_KNOWN: list[tuple[Payload, date, str, str]] = [
    # 2024-03-31 was the last Sunday of March: 01:30 does not exist; 02:00 BST is 01:00Z.
    (
        {"kind": "MONTHLY", **_LONDON, "last_day": True},
        date(2024, 3, 31),
        "2024-03-31T01:00:00",
        "gap->first valid",
    ),
    # 2027-10-31 is the last Sunday of October: 01:30 happens twice; BST's is 00:30Z.
    (
        {"kind": "MONTHLY", **_LONDON, "last_day": True},
        date(2027, 10, 31),
        "2027-10-31T00:30:00",
        "fold->earlier",
    ),
    (
        {"kind": "MONTHLY", **_LONDON, "days_of_month": [31]},
        date(2027, 10, 31),
        "2027-10-31T00:30:00",
        "fold->earlier",
    ),
    (
        {"kind": "YEARLY", **_LONDON, "dates": [{"month": 3, "day": 31}]},
        date(2024, 3, 31),
        "2024-03-31T01:00:00",
        "gap->first valid",
    ),
    # New York 2026: 02:30 on March 8 does not exist (07:00Z); 01:30 on November 1 twice (05:30Z).
    (
        {"kind": "MONTHLY", **_NEW_YORK, "local_time": "02:30", "days_of_month": [8]},
        date(2026, 3, 8),
        "2026-03-08T07:00:00",
        "gap->first valid",
    ),
    (
        {"kind": "YEARLY", **_NEW_YORK, "local_time": "01:30", "dates": [{"month": 11, "day": 1}]},
        date(2026, 11, 1),
        "2026-11-01T05:30:00",
        "fold->earlier",
    ),
    (
        {
            "kind": "YEARLY",
            **_NEW_YORK,
            "local_time": "02:30",
            "dates": [{"month": 3, "day": 8}, {"month": 2, "day": 29}],
        },
        date(2026, 3, 8),
        "2026-03-08T07:00:00",
        "gap->first valid",
    ),
    # Apia skipped 2011-12-30: a monthly 30th has no December 2011 occurrence.
    (
        {
            "kind": "MONTHLY",
            "local_time": "09:00",
            "timezone": "Pacific/Apia",
            "days_of_month": [30],
        },
        date(2011, 12, 30),
        "",
        "missing date",
    ),
]


@pytest.mark.gate(RECURRENCE)
@pytest.mark.parametrize(("payload", "day", "expected", "rule"), CALENDAR_KNOWN)
def test_known_calendar_transitions(
    gate_evidence: GateEvidence, payload: Payload, day: date, expected: str, rule: str
) -> None:
    cadence = parse_cadence(payload)
    assert not isinstance(cadence, cad.OnceCadence)
    start = datetime.combine(day, datetime.min.time(), tzinfo=UTC) - timedelta(days=2)
    firings = [f for f in upcoming(cadence, start, 3) if f.local_date == day]
    assert RULE_NAMES[assert_resolution_on(REAL, cadence, day)] == rule
    if rule == "missing date":
        assert firings == []
        gate_evidence.record("case", f"{payload} skips {day}")
        return
    assert len(firings) == 1, "the selected date fires exactly once"
    assert firings[0].instant == datetime.fromisoformat(expected).replace(tzinfo=UTC)
    assert firings[0].resolution.value == rule
    gate_evidence.record("case", firings[0].describe())


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


# (payload, reference) pairs whose answer lies as far from the reference as a selector
# allows: a monthly 30th after January 30 (March, two months on), a 31st before the
# next month's start (the previous month's 31st), February 29 across 2100 (eight years
# either side). Each against the oracle's day-by-day enumeration.
_UTC = {"local_time": "09:00", "timezone": "UTC"}
FAR_ANSWERS: list[tuple[Payload, datetime]] = [
    ({"kind": "MONTHLY", **_UTC, "days_of_month": [30]}, datetime(2026, 1, 30, 10, tzinfo=UTC)),
    ({"kind": "MONTHLY", **_UTC, "days_of_month": [30]}, datetime(2028, 1, 31, 8, tzinfo=UTC)),
    ({"kind": "MONTHLY", **_UTC, "days_of_month": [31]}, datetime(2026, 5, 1, 8, tzinfo=UTC)),
    ({"kind": "MONTHLY", **_UTC, "days_of_month": [31]}, datetime(2026, 3, 30, 8, tzinfo=UTC)),
    (
        {"kind": "YEARLY", **_UTC, "dates": [{"month": 2, "day": 29}]},
        datetime(2104, 2, 28, tzinfo=UTC),
    ),
    (
        {"kind": "YEARLY", **_UTC, "dates": [{"month": 2, "day": 29}]},
        datetime(2096, 3, 1, tzinfo=UTC),
    ),
    (
        {
            "kind": "YEARLY",
            "local_time": "09:00",
            "timezone": "Europe/Paris",
            "dates": [{"month": 2, "day": 29}],
        },
        datetime(2104, 1, 15, tzinfo=UTC),
    ),
]


@pytest.mark.gate(RECURRENCE)
@pytest.mark.parametrize(("payload", "reference"), FAR_ANSWERS)
def test_answers_far_from_the_reference(
    gate_evidence: GateEvidence, payload: Payload, reference: datetime
) -> None:
    """A scan of candidate months or years bounded too tightly answers "none" (or a
    later date) where the next or latest occurrence is simply far away."""
    cadence = parse_cadence(payload)
    assert_next_and_latest(REAL, cadence, reference)
    assert_count(REAL, cadence, reference - timedelta(days=9 * 366), reference)
    gate_evidence.record("case", f"{payload} around {reference.isoformat()}")


# Quiet spans (no offset change within days of either end): the count takes its
# shortcut, reading each end's wall clock instead of resolving occurrences.
ENDS: list[Payload] = [
    {"kind": "MONTHLY", **_UTC, "days_of_month": [15], "last_day": True},
    {"kind": "MONTHLY", "local_time": "07:30", "timezone": "America/New_York", "last_day": True},
    {"kind": "YEARLY", **_UTC, "dates": [{"month": 2, "day": 29}, {"month": 7, "day": 4}]},
]


@pytest.mark.gate(RECURRENCE)
@pytest.mark.parametrize("payload", ENDS)
def test_counts_include_an_occurrence_at_either_end(
    gate_evidence: GateEvidence, payload: Payload
) -> None:
    """``count_inclusive`` is inclusive at both ends: a span starting or ending exactly on
    an occurrence counts it (a coalesced count from ``next_fire_at`` starts on one)."""
    cadence = parse_cadence(payload)
    occurrence = first_at_or_after(cadence, datetime(2028, 6, 1, tzinfo=UTC))
    assert occurrence is not None
    assert count_inclusive(cadence, occurrence, occurrence) == 1
    assert_count(REAL, cadence, occurrence, occurrence + timedelta(days=400))
    assert_count(REAL, cadence, occurrence - timedelta(days=400), occurrence)
    gate_evidence.record("case", f"{payload} from {occurrence.isoformat()}")
