"""Materializer facets of gate.schedule.misfire_bounded and
gate.schedule.calendar_misfire_bounded, on PostgreSQL through the scheduler role.

The clock jumps across thousands of nominal instants (daily: ~3,000; monthly with
day 31 and last_day: 1,200 months; yearly February 29: 400 years). One scan must
write exactly one occurrence (MATERIALIZED within grace; MISSED with
``schedule.materialize.grace_expired`` outside it, no session or run) and exactly one
``schedule.misfires_coalesced`` event whose first/last/count equal an independent
brute-force walk, store the first future instant directly, and do bounded work: the
calculator's operation counter stays far below the number of missed instants. A
second scan at the same instant writes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from gates.checks.materialize_support import Harness
from gates.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.recurrence.engine import next_after
from scheduling.recurrence import OperationCounter, RecurrenceCalculator
from scheduling.service.materializer import GRACE_EXPIRED, MaterializeStatus

pytestmark = pytest.mark.postgres

MISFIRE = "gate.schedule.misfire_bounded"
CALENDAR = "gate.schedule.calendar_misfire_bounded"
OPS_BOUND = 2_000


def brute_instants(cadence: dict[str, Any], after: datetime, until: datetime) -> list[datetime]:
    """Every nominal instant in ``[after, until]`` by stepping one firing at a time."""
    parsed = parse_cadence(cadence)
    out: list[datetime] = []
    current = next_after(parsed, after - timedelta(microseconds=1))
    while current is not None and current <= until:
        out.append(current)
        current = next_after(parsed, current)
    return out


async def outage_scan(
    url: str, cadence: dict[str, Any], outage: timedelta, *, late: timedelta
) -> dict[str, Any]:
    """Create, jump ``outage`` past the first instant plus ``late``, scan twice."""
    h = await Harness.open(url)
    try:
        sid = await h.create(cadence=cadence, misfire_grace_seconds=900)
        first = await h.next_fire(sid)
        walk = brute_instants(cadence, first, first + outage)
        latest = walk[-1]
        h.clock.advance_to(latest + late)
        counter = OperationCounter()
        materializer = h.materializer(calculator=RecurrenceCalculator(counter))
        before = await h.counts()
        result = await materializer.materialize(sid)
        after = await h.counts()
        again = await h.materializer().materialize(sid)
        final = await h.counts()
        ledger = (await h.ledger()).of(sid)
        schedule = await h.schedule(sid)
        return {
            "result": result,
            "again": again,
            "delta": {k: after[k] - before[k] for k in after},
            "second_delta": {k: final[k] - after[k] for k in after},
            "ledger": ledger,
            "schedule": schedule,
            "walk": walk,
            "ops": counter.total,
            "now": h.clock.now(),
            "cadence": cadence,
        }
    finally:
        await h.close()


def assert_bounded_scan(out: dict[str, Any], *, materialized: bool) -> None:
    walk: list[datetime] = out["walk"]
    ledger = out["ledger"]
    result = out["result"]
    assert result.status is MaterializeStatus.DECIDED
    occurrences = ledger.occurrences
    assert len(occurrences) == 1, f"{len(occurrences)} occurrences for one scan"
    occ = occurrences[0]
    assert occ["nominal_fire_at"] == walk[-1]
    coalesced = [e for e in ledger.events if e["event_type"] == "schedule.misfires_coalesced"]
    assert len(coalesced) == 1, f"{len(coalesced)} coalescing events"
    payload = coalesced[0]["payload"]
    assert payload["count"] == len(walk) - 1
    assert payload["first_nominal_at"] == format_instant(walk[0])
    assert payload["last_nominal_at"] == format_instant(walk[-2])
    expected_next = next_after(parse_cadence(out["cadence"]), out["now"])
    assert out["schedule"]["next_fire_at"] == expected_next
    assert expected_next is not None
    assert expected_next > out["now"]
    # Bounded: never one step per missed date (the walk is the per-date count).
    assert out["ops"] < OPS_BOUND, out["ops"]
    assert len(walk) < 200 or out["ops"] < len(walk) // 2, (out["ops"], len(walk))
    assert sum(out["second_delta"].values()) == 0, out["second_delta"]
    assert out["again"].status is MaterializeStatus.NOT_DUE
    if materialized:
        assert occ["disposition"] == "MATERIALIZED"
        assert out["delta"]["runs"] == 1
        assert out["delta"]["sessions"] == 1
    else:
        assert occ["disposition"] == "MISSED"
        assert occ["reason_code"] == GRACE_EXPIRED
        assert out["delta"]["runs"] == out["delta"]["sessions"] == 0
        assert out["schedule"]["consecutive_failures"] == 1


def record(ev: GateEvidence, name: str, out: dict[str, Any]) -> None:
    ev.record(
        name,
        {
            "missed_instants": len(out["walk"]),
            "coalesced_count": len(out["walk"]) - 1,
            "calculator_operations": out["ops"],
            "rows_written_by_scan": out["delta"],
            "rows_written_by_second_scan": out["second_delta"],
            "disposition": out["ledger"].occurrences[0]["disposition"],
            "next_fire_at": format_instant(out["schedule"]["next_fire_at"]),
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


@pytest.mark.gate(MISFIRE, facet="materializer")
async def test_daily_outage_one_scan(pg_url: str, gate_evidence: GateEvidence) -> None:
    out = await outage_scan(pg_url, DAILY, timedelta(days=3000), late=timedelta(seconds=20))
    assert_bounded_scan(out, materialized=True)
    assert len(out["walk"]) >= 3000
    record(gate_evidence, "daily_within_grace", out)


@pytest.mark.gate(MISFIRE, facet="materializer")
async def test_daily_outage_missed_variant(pg_url: str, gate_evidence: GateEvidence) -> None:
    out = await outage_scan(pg_url, DAILY, timedelta(days=3000), late=timedelta(hours=2))
    assert_bounded_scan(out, materialized=False)
    record(gate_evidence, "daily_outside_grace", out)


@pytest.mark.gate(CALENDAR, facet="materializer")
async def test_monthly_outage_one_scan(pg_url: str, gate_evidence: GateEvidence) -> None:
    out = await outage_scan(pg_url, MONTHLY, timedelta(days=36525), late=timedelta(minutes=3))
    assert_bounded_scan(out, materialized=True)
    assert len(out["walk"]) >= 1199
    record(gate_evidence, "monthly_100_years", out)


@pytest.mark.gate(CALENDAR, facet="materializer")
async def test_yearly_outage_missed(pg_url: str, gate_evidence: GateEvidence) -> None:
    out = await outage_scan(pg_url, YEARLY, timedelta(days=146097), late=timedelta(days=3))
    assert_bounded_scan(out, materialized=False)
    assert len(out["walk"]) >= 96
    record(gate_evidence, "yearly_feb29_400_years", out)
