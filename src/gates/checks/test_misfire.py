"""Materializer facets of gate.schedule.misfire_bounded and
gate.schedule.calendar_misfire_bounded, on PostgreSQL through the scheduler role.

Each check puts one schedule through two outages, each closed by ONE schedule-worker
scan (``ScheduleWorker.run_once`` over the strict harness, so a swallowed error fails):
a short one (a week of daily, a year of monthly, twelve years of February 29) and a
long one (a century of daily: ~36,500 instants; 1,000 years of monthly day 31 plus
last_day: ~12,000; 4,000 years of yearly February 29: ~970). After each outage the scan
must write exactly one occurrence (MATERIALIZED within grace; MISSED with
``schedule.materialize.grace_expired`` outside it, no session or run) and exactly one
``schedule.misfires_coalesced`` event whose first/last/count equal a step-by-step walk,
store the first future instant directly, and a second scan finds nothing due and
writes nothing.

Bounded work is proven by the calculator's operation counter, not by timing: the long
outage's count stays within ``SAME_ORDER`` times the short outage's (a per-date loop
grows with the span), and the long outage spans at least ``INSTANTS_PER_OPERATION``
times more missed instants than operations, so a loop over them cannot hide under it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.checks.work_meter import PRODUCT_ROOT, metered_async
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.recurrence.engine import next_after
from scheduling.recurrence import OperationCounter, RecurrenceCalculator
from scheduling.service.materializer import GRACE_EXPIRED, MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

MISFIRE = "gate.schedule.misfire_bounded"
CALENDAR = "gate.schedule.calendar_misfire_bounded"
SAME_ORDER = 3
"""The long outage may cost at most this many times the short one's operations."""
INSTANTS_PER_OPERATION = 10
"""The long outage spans at least this many missed instants per operation counted."""
GRACE_SECONDS = 900
SCAN_LINE_CEILING = 7_000
"""Product lines (harness-measured) one scan may execute whatever the outage; the real
scan executes ~2,100-2,700 over any long outage (~4,600 when it is the first scan)."""

Calculators = Callable[[OperationCounter], RecurrenceCalculator]


def brute_instants(cadence: dict[str, Any], after: datetime, until: datetime) -> list[datetime]:
    """Every nominal instant in ``[after, until]`` by stepping one firing at a time."""
    parsed = parse_cadence(cadence)
    out: list[datetime] = []
    current = next_after(parsed, after - timedelta(microseconds=1))
    while current is not None and current <= until:
        out.append(current)
        current = next_after(parsed, current)
    return out


async def outage(
    h: MaterializeWorld,
    sid: UUID,
    cadence: dict[str, Any],
    span: timedelta,
    *,
    late: timedelta,
    calculators: Calculators = RecurrenceCalculator,
    extra_roots: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Jump ``span`` past the schedule's next firing plus ``late``; one worker scan."""
    first = await h.next_fire(sid)
    walk = brute_instants(cadence, first, first + span)
    h.clock.advance_to(walk[-1] + late)
    counter = OperationCounter()
    worker = h.worker(h.materializer(calculator=calculators(counter)))
    before_ledger = (await h.ledger()).of(sid)
    before = await h.counts()
    report, work = await metered_async(lambda: h.scan(worker), roots=(PRODUCT_ROOT, *extra_roots))
    after = await h.counts()
    again = await h.scan(worker)
    direct = await h.materializer().materialize(sid)
    final = await h.counts()
    ledger = (await h.ledger()).of(sid)
    seen = {o["id"] for o in before_ledger.occurrences}
    seen_events = {e["id"] for e in before_ledger.events}
    return {
        "report": report,
        "again": again,
        "direct": direct,
        "sid": sid,
        "delta": {k: after[k] - before[k] for k in after},
        "second_delta": {k: final[k] - after[k] for k in after},
        "occurrences": [o for o in ledger.occurrences if o["id"] not in seen],
        "events": [e for e in ledger.events if e["id"] not in seen_events],
        "schedule": await h.schedule(sid),
        "walk": walk,
        "ops": counter.total,
        "lines": work.lines,
        "now": h.clock.now(),
        "cadence": cadence,
    }


def assert_one_scan(out: dict[str, Any], *, materialized: bool) -> None:
    """One scan decided the latest instant, coalesced the rest, advanced past now."""
    walk: list[datetime] = out["walk"]
    report = out["report"]
    assert report.scanned == [out["sid"]], report
    assert [r.status for r in report.results] == [MaterializeStatus.DECIDED]
    occurrences = out["occurrences"]
    assert len(occurrences) == 1, f"{len(occurrences)} occurrences for one scan"
    occ = occurrences[0]
    assert occ["nominal_fire_at"] == walk[-1]
    coalesced = [e for e in out["events"] if e["event_type"] == "schedule.misfires_coalesced"]
    assert len(coalesced) == 1, f"{len(coalesced)} coalescing events"
    payload = coalesced[0]["payload"]
    assert payload["count"] == len(walk) - 1
    assert payload["first_nominal_at"] == format_instant(walk[0])
    assert payload["last_nominal_at"] == format_instant(walk[-2])
    expected_next = next_after(parse_cadence(out["cadence"]), out["now"])
    assert expected_next is not None
    assert out["schedule"]["next_fire_at"] == expected_next > out["now"]
    # The same worker scans again: nothing is due, nothing is written.
    assert out["again"].scanned == []
    assert out["direct"].status is MaterializeStatus.NOT_DUE
    assert sum(out["second_delta"].values()) == 0, out["second_delta"]
    if materialized:
        assert occ["disposition"] == "MATERIALIZED"
        assert out["delta"]["runs"] == out["delta"]["sessions"] == 1
    else:
        assert occ["disposition"] == "MISSED"
        assert occ["reason_code"] == GRACE_EXPIRED
        assert out["delta"]["runs"] == out["delta"]["sessions"] == 0


def assert_bounded(short: dict[str, Any], long: dict[str, Any]) -> None:
    """The long outage's work is of the short one's order, far below its instants."""
    assert len(long["walk"]) >= 100 * len(short["walk"]), "the outages are not far apart"
    assert long["ops"] <= SAME_ORDER * short["ops"], (short["ops"], long["ops"])
    assert len(long["walk"]) >= INSTANTS_PER_OPERATION * long["ops"], (
        long["ops"],
        len(long["walk"]),
    )
    assert long["lines"] <= SAME_ORDER * short["lines"], (
        f"the long scan executed {long['lines']} product lines against {short['lines']} "
        "for the short one"
    )
    assert long["lines"] <= SCAN_LINE_CEILING, (
        f"the long scan executed {long['lines']} product lines (ceiling {SCAN_LINE_CEILING}): "
        f"work grows with the {len(long['walk'])} missed instants"
    )


async def two_outages(
    url: str,
    cadence: dict[str, Any],
    short: timedelta,
    long: timedelta,
    *,
    long_late: timedelta,
    calculators: Calculators = RecurrenceCalculator,
    extra_roots: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A short outage closed within grace, the run finished, then a long outage."""
    h = await MaterializeWorld.open(url)
    try:
        sid = await h.create(cadence=cadence, misfire_grace_seconds=GRACE_SECONDS)
        first = await outage(
            h,
            sid,
            cadence,
            short,
            late=timedelta(seconds=20),
            calculators=calculators,
            extra_roots=extra_roots,
        )
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE status = 'QUEUED'",
            t=h.clock.now(),
        )
        second = await outage(
            h, sid, cadence, long, late=long_late, calculators=calculators, extra_roots=extra_roots
        )
        return first, second
    finally:
        await h.close()


def record(ev: GateEvidence, name: str, short: dict[str, Any], long: dict[str, Any]) -> None:
    def one(out: dict[str, Any]) -> dict[str, Any]:
        return {
            "missed_instants": len(out["walk"]),
            "coalesced_count": len(out["walk"]) - 1,
            "calculator_operations": out["ops"],
            "product_lines_measured_by_harness": out["lines"],
            "rows_written_by_scan": out["delta"],
            "rows_written_by_second_scan": out["second_delta"],
            "disposition": out["occurrences"][0]["disposition"],
            "next_fire_at": format_instant(out["schedule"]["next_fire_at"]),
        }

    ev.record(
        name,
        {
            "short_outage": one(short),
            "long_outage": one(long),
            "operations_ratio_long_to_short": round(long["ops"] / max(short["ops"], 1), 2),
            "bound": f"long ops <= {SAME_ORDER} x short ops; instants >= "
            f"{INSTANTS_PER_OPERATION} x ops; long lines <= {SAME_ORDER} x short lines "
            f"and <= {SCAN_LINE_CEILING}",
            "driven_by": "ScheduleWorker.run_once (one scan per outage)",
        },
    )


DAILY = {"kind": "DAILY", "local_time": "09:00", "timezone": "America/New_York"}
MONTHLY = {
    "kind": "MONTHLY",
    "local_time": "07:30",
    "days_of_month": [31],
    "last_day": True,
    "timezone": "Australia/Lord_Howe",
}
YEARLY = {
    "kind": "YEARLY",
    "local_time": "02:30",
    "dates": [{"month": 2, "day": 29}],
    "timezone": "Europe/London",
}
YEARS = 365.2425


def days(years: float) -> timedelta:
    return timedelta(days=round(years * YEARS))


@pytest.mark.gate(MISFIRE, facet="materializer")
async def test_daily_century_outage_one_scan(pg_url: str, gate_evidence: GateEvidence) -> None:
    short, long = await two_outages(
        pg_url, DAILY, timedelta(days=7), days(100), long_late=timedelta(seconds=20)
    )
    assert_one_scan(short, materialized=True)
    assert_one_scan(long, materialized=True)
    assert len(long["walk"]) >= 36_000 > SCAN_LINE_CEILING
    assert_bounded(short, long)
    record(gate_evidence, "daily_100_years_within_grace", short, long)


@pytest.mark.gate(MISFIRE, facet="materializer")
async def test_daily_outage_missed_variant(pg_url: str, gate_evidence: GateEvidence) -> None:
    short, long = await two_outages(
        pg_url, DAILY, timedelta(days=7), timedelta(days=3000), long_late=timedelta(hours=2)
    )
    assert_one_scan(short, materialized=True)
    assert_one_scan(long, materialized=False)
    assert long["schedule"]["consecutive_failures"] == 1
    assert len(long["walk"]) >= 3000
    assert_bounded(short, long)
    record(gate_evidence, "daily_3000_days_outside_grace", short, long)


@pytest.mark.gate(CALENDAR, facet="materializer")
async def test_monthly_millennium_outage_one_scan(pg_url: str, gate_evidence: GateEvidence) -> None:
    short, long = await two_outages(
        pg_url, MONTHLY, days(1), days(1000), long_late=timedelta(minutes=3)
    )
    assert_one_scan(short, materialized=True)
    assert_one_scan(long, materialized=True)
    assert len(long["walk"]) >= 11_990 > SCAN_LINE_CEILING
    assert_bounded(short, long)
    record(gate_evidence, "monthly_1000_years", short, long)


@pytest.mark.gate(CALENDAR, facet="materializer")
async def test_yearly_feb29_4000_year_outage_missed(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    short, long = await two_outages(
        pg_url, YEARLY, days(12), days(4000), long_late=timedelta(days=3)
    )
    assert_one_scan(short, materialized=True)
    assert_one_scan(long, materialized=False)
    # 4,000 Gregorian years hold exactly 970 leap days.
    assert len(long["walk"]) >= 969
    assert_bounded(short, long)
    record(gate_evidence, "yearly_feb29_4000_years", short, long)


@pytest.mark.gate(MISFIRE, facet="materializer")
async def test_exactly_one_older_instant_is_coalesced(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """The smallest catch-up: two instants due, the older one folded into ONE
    coalescing event of count 1 (an implementation that coalesces only "many" misses
    omits it)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(cadence=DAILY, misfire_grace_seconds=GRACE_SECONDS)
        out = await outage(h, sid, DAILY, timedelta(days=1), late=timedelta(seconds=20))
    finally:
        await h.close()
    assert len(out["walk"]) == 2, out["walk"]
    assert_one_scan(out, materialized=True)
    gate_evidence.record(
        "one_older_instant",
        {"missed_instants": 2, "coalesced_count": 1, "coalescing_events": 1},
    )
