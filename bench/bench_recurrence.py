"""Benchmark: scheduling.recurrence vs dateutil.rrule + zoneinfo on the same cadences.

    python bench/bench_recurrence.py --output bench/results/recurrence.json

Measures look-up throughput (next_after, latest_at_or_before, count_inclusive over one
month) on random reference instants, the cost of counting missed daily occurrences over
one day versus one hundred years, and how often the two libraries disagree (rrule works
in wall time with zoneinfo's fold=0 answer, so it differs in DST gaps and folds).
Timings are wall-clock measurements on a shared machine: compare ratios, not absolutes;
each rate is the median of five rounds that alternate between the two libraries.
The operation counts are exact and machine-independent.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dateutil import rrule

from scheduling import parse_cadence
from scheduling.domain.cadence import Cadence
from scheduling.domain.recurrence.tzif import zone_transitions
from scheduling.domain.recurrence.zones import load_zone
from scheduling.recurrence import (
    OperationCounter,
    count_inclusive,
    latest_at_or_before,
    next_after,
)
from scheduling.tzdata_info import tzdata_version

CADENCES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (our payload, rrule keyword arguments)
    "daily_new_york_02_30": (
        {"kind": "DAILY", "local_time": "02:30", "timezone": "America/New_York"},
        {"freq": rrule.DAILY},
    ),
    "weekly_london_mon_fri_09_00": (
        {"kind": "WEEKLY", "local_time": "09:00", "timezone": "Europe/London", "weekdays": [1, 5]},
        {"freq": rrule.WEEKLY, "byweekday": (rrule.MO, rrule.FR)},
    ),
    "monthly_sydney_1_15_last_02_30": (
        {
            "kind": "MONTHLY",
            "local_time": "02:30",
            "timezone": "Australia/Sydney",
            "days_of_month": [1, 15],
            "last_day": True,
        },
        {"freq": rrule.MONTHLY, "bymonthday": (1, 15, -1)},
    ),
    "yearly_berlin_feb_29": (
        {
            "kind": "YEARLY",
            "local_time": "09:00",
            "timezone": "Europe/Berlin",
            "dates": [{"month": 2, "day": 29}],
        },
        {"freq": rrule.YEARLY, "bymonth": 2, "bymonthday": 29},
    ),
}


# rrule iterates from its dtstart on every look-up, so a rule anchored in 1900 would
# make each look-up cost a century. As a caller would, anchor each look-up's rule
# shortly before its reference: 9 years for Feb 29, 400 days otherwise.
Rule = Callable[[datetime], rrule.rrule]


def _rule(cadence: Cadence, kwargs: dict[str, Any]) -> Rule:
    zone = load_zone(cadence.timezone or "UTC")
    wall = cadence.local_time  # type: ignore[union-attr]
    back = timedelta(days=9 * 366 if kwargs.get("bymonthday") == 29 else 400)

    def anchored(reference: datetime) -> rrule.rrule:
        day = (reference.astimezone(zone) - back).date()
        start = datetime(day.year, day.month, 1, wall.hour, wall.minute, wall.second, tzinfo=zone)
        return rrule.rrule(dtstart=start, cache=False, **kwargs)

    return anchored


def _rr_next(rule: Rule, zone: ZoneInfo, x: datetime) -> datetime | None:
    found = rule(x).after(x.astimezone(zone), inc=False)
    return None if found is None else found.astimezone(UTC)


def _rr_latest(rule: Rule, zone: ZoneInfo, x: datetime) -> datetime | None:
    found = rule(x).before(x.astimezone(zone), inc=True)
    return None if found is None else found.astimezone(UTC)


def _rr_count(rule: Rule, zone: ZoneInfo, a: datetime, b: datetime) -> int:
    return len(rule(a).between(a.astimezone(zone), b.astimezone(zone), inc=True))


def _rate(function: Callable[[datetime], object], references: list[datetime]) -> float:
    started = time.perf_counter()
    for x in references:
        function(x)
    elapsed = time.perf_counter() - started
    return round(len(references) / elapsed, 1)


ROUNDS = 5


def _rates(
    functions: dict[str, tuple[Callable[[datetime], object], Callable[[datetime], object]]],
    references: list[datetime],
) -> tuple[dict[str, float], dict[str, float]]:
    """Median rates of each (ours, theirs) pair over ``ROUNDS`` alternating rounds, so a
    burst of load from other processes on a shared machine hits both sides alike."""
    samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in functions}
    for _ in range(ROUNDS):
        for name, (ours, theirs) in functions.items():
            samples[name][0].append(_rate(ours, references))
            samples[name][1].append(_rate(theirs, references))
    return (
        {k: statistics.median(v[0]) for k, v in samples.items()},
        {k: statistics.median(v[1]) for k, v in samples.items()},
    )


def _timed(function: Callable[[], object], repeat: int = 3) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return round(statistics.median(samples) * 1000, 3)


def _measure(
    payload: dict[str, Any], kwargs: dict[str, Any], references: list[datetime]
) -> dict[str, Any]:
    """Throughput and disagreements of both libraries on one cadence."""
    cadence = parse_cadence(payload)
    zone = load_zone(cadence.timezone or "UTC")
    rule = _rule(cadence, kwargs)
    month = timedelta(days=31)
    ours, theirs = _rates(
        {
            "next_after_per_s": (
                lambda x: next_after(cadence, x),
                lambda x: _rr_next(rule, zone, x),
            ),
            "latest_at_or_before_per_s": (
                lambda x: latest_at_or_before(cadence, x),
                lambda x: _rr_latest(rule, zone, x),
            ),
            "count_inclusive_31d_per_s": (
                lambda x: count_inclusive(cadence, x, x + month),
                lambda x: _rr_count(rule, zone, x, x + month),
            ),
        },
        references,
    )
    disagreements = [
        {"reference": x.isoformat(), "ours": str(a), "rrule": str(b)}
        for x in references
        if (a := next_after(cadence, x)) != (b := _rr_next(rule, zone, x))
    ]
    near = [
        t.instant - delta
        for t in zone_transitions(zone.key).between(
            datetime(2020, 1, 1, tzinfo=UTC), datetime(2030, 12, 31, tzinfo=UTC)
        )
        for delta in (timedelta(hours=30), timedelta(hours=12), timedelta(seconds=1))
    ]
    at_transitions = [
        {"reference": x.isoformat(), "ours": str(a), "rrule": str(b)}
        for x in near
        if (a := next_after(cadence, x)) != (b := _rr_next(rule, zone, x))
    ]
    return {
        "references_near_transitions": len(near),
        "disagreements_near_transitions": len(at_transitions),
        "near_transition_examples": at_transitions[:3],
        "cadence": cadence.to_payload(),
        "scheduling": ours,
        "dateutil_rrule_zoneinfo": theirs,
        "next_after_disagreements": len(disagreements),
        "disagreement_examples": disagreements[:3],
    }


def run(samples: int, seed: int) -> dict[str, Any]:
    rnd = random.Random(seed)
    base = datetime(2000, 1, 1, tzinfo=UTC)
    references = [base + timedelta(seconds=rnd.randrange(40 * 365 * 86400)) for _ in range(samples)]
    return {
        name: _measure(payload, kwargs, references) for name, (payload, kwargs) in CADENCES.items()
    }


def count_spans() -> dict[str, Any]:
    """Counting missed dailies: one day vs one hundred years, in time and in operations."""
    payload, kwargs = CADENCES["daily_new_york_02_30"]
    cadence = parse_cadence(payload)
    zone = load_zone("America/New_York")
    rule = _rule(cadence, kwargs)
    start = datetime(1950, 1, 1, 12, tzinfo=UTC)
    out: dict[str, Any] = {}
    for label, span in (("1_day", timedelta(days=1)), ("100_years", timedelta(days=36525))):
        end = start + span
        counter = OperationCounter()
        count = count_inclusive(cadence, start, end, counter)
        out[label] = {
            "count": count,
            "scheduling_ms": _timed(lambda end=end: count_inclusive(cadence, start, end)),
            "scheduling_operations": vars(counter),
            "rrule_count": _rr_count(rule, zone, start, end),
            "rrule_ms": _timed(lambda end=end: _rr_count(rule, zone, start, end), repeat=1),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("bench/results/recurrence.json"))
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    report = {
        "environment": {
            "python": platform.python_version(),
            "tzdata": tzdata_version(),
            "machine": platform.machine(),
            "samples": args.samples,
            "seed": args.seed,
        },
        "throughput": run(args.samples, args.seed),
        "count_missed_dailies": count_spans(),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(json.dumps(report["count_missed_dailies"], indent=2, default=str))
    for name, row in report["throughput"].items():
        print(name, row["scheduling"], row["dateutil_rrule_zoneinfo"])
        print(
            "  disagreements: random",
            row["next_after_disagreements"],
            "near transitions",
            row["disagreements_near_transitions"],
            row["near_transition_examples"][:1],
        )


if __name__ == "__main__":
    main()
