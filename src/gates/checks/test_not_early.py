"""Materializer facet of gate.schedule.not_early, on PostgreSQL with the schedule worker.

1. A worker scan one microsecond before ``next_fire_at`` writes nothing (every written
   table's row count and the schedule row are unchanged, for a daily and a one-time
   schedule); one microsecond later the same scan decides the instant, with
   ``materialized_at`` equal to it.
2. Property: generated one-time, daily and weekly definitions over many zones (DST
   gaps and folds, half-hour and 45-minute offsets), scanned by the worker at clock
   moves aimed at ``next_fire_at - 1 us``, ``next_fire_at`` and ``+ 1 us`` as well as
   random jumps: no occurrence has ``materialized_at`` (or, for any disposition,
   ``created_at``) before its nominal instant, and the ledger checker finds nothing.

Reproduce: ``SCHEDULING_GATE_SEED=<seed> .venv/bin/pytest src/gates/checks/test_not_early.py``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gates.checks.materialize_support import Harness
from gates.checks.service_support import principal
from gates.pytest_plugin import GateEvidence, gate_profile
from scheduling.service.materializer import MaterializeStatus
from simulation.checkers import check_ledger

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.not_early"
SEED = int(os.environ.get("SCHEDULING_GATE_SEED", "20261130"))
EXAMPLES = {"quick": 12, "deep": 300}[gate_profile()]
TICK = timedelta(microseconds=1)
ZONES = (
    "UTC",
    "America/New_York",
    "America/St_Johns",
    "America/Santiago",
    "Europe/London",
    "Europe/Dublin",
    "Africa/Casablanca",
    "Asia/Kathmandu",
    "Asia/Tehran",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Pacific/Apia",
    "Antarctica/Troll",
)


async def scan_before_and_at(url: str, cadence: dict[str, Any]) -> dict[str, Any]:
    h = await Harness.open(url)
    try:
        sid = await h.create(cadence=cadence)
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire - TICK)
        before, row = await h.counts(), await h.schedule(sid)
        worker = h.worker(h.materializer())
        early = await worker.run_once()
        direct = await h.materializer().materialize(sid)
        after, row_after = await h.counts(), await h.schedule(sid)
        assert early.scanned == []
        assert direct.status is MaterializeStatus.NOT_DUE
        assert after == before, (before, after)
        assert row_after == row
        h.clock.advance(TICK.total_seconds())
        on_time = await worker.run_once()
        assert on_time.scanned == [sid]
        occurrence = (await h.ledger()).of(sid).occurrences[0]
        assert occurrence["nominal_fire_at"] == fire
        assert occurrence["materialized_at"] == fire
        return {"nominal": fire.isoformat(), "rows_before_instant": sum(after.values())}
    finally:
        await h.close()


@pytest.mark.gate(GATE, facet="materializer")
async def test_scan_one_microsecond_early_writes_nothing(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    daily = await scan_before_and_at(
        pg_url, {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}
    )
    gate_evidence.record("daily", daily)


@pytest.mark.gate(GATE, facet="materializer")
async def test_one_time_scan_one_microsecond_early(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    once = await scan_before_and_at(pg_url, {"kind": "ONCE", "at": "2026-03-05T10:15:30.5+05:45"})
    gate_evidence.record("once", once)


local_times = st.builds(
    lambda h, m, s: f"{h:02d}:{m:02d}:{s:02d}",
    st.integers(0, 23),
    st.sampled_from((0, 15, 30, 59)),
    st.sampled_from((0, 0, 1, 59)),
)


@st.composite
def cadences(draw: st.DrawFn, now: datetime) -> dict[str, Any]:
    kind = draw(st.sampled_from(("ONCE", "DAILY", "WEEKLY")))
    zone = draw(st.sampled_from(ZONES))
    if kind == "ONCE":
        offset = draw(st.integers(60, 6 * 86400))
        minutes = draw(st.sampled_from((0, 330, -210, 345, 780, -600)))
        tz = timedelta(minutes=minutes)
        at = (now + timedelta(seconds=offset)).astimezone(UTC) + tz
        sign = "+" if minutes >= 0 else "-"
        text = (
            at.replace(tzinfo=None).isoformat()
            + f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
        )
        return {"kind": "ONCE", "at": text}
    payload: dict[str, Any] = {"kind": kind, "local_time": draw(local_times), "timezone": zone}
    if kind == "WEEKLY":
        payload["weekdays"] = sorted(draw(st.sets(st.integers(1, 7), min_size=1, max_size=3)))
    return payload


moves = st.lists(
    st.one_of(
        st.tuples(st.just("aim"), st.sampled_from((-1, 0, 1))),
        st.tuples(st.just("jump"), st.integers(1, 3 * 86400)),
    ),
    min_size=3,
    max_size=8,
)


class Tally:
    def __init__(self) -> None:
        self.schedules = 0
        self.scans = 0
        self.occurrences = 0
        self.kinds: dict[str, int] = {}
        self.dispositions: dict[str, int] = {}


async def run_example(
    url: str, number: int, defs: list[dict[str, Any]], plan: list[tuple[str, int]], tally: Tally
) -> None:
    start = datetime(2026, 3, 2, 8, 0, tzinfo=UTC) + timedelta(days=400 * number)
    who = principal(f"early-{number}")
    h = await Harness.open(url, seed=SEED + number, start=start, who=who)
    try:
        ids = []
        for i, cadence in enumerate(defs):
            try:
                ids.append(await h.create(who, key=f"e{i}", cadence=cadence))
            except Exception as exc:  # a one-time instant the service refuses (past)
                if "no_future_occurrence" not in str(getattr(exc, "code", "")):
                    raise
                continue
            tally.kinds[cadence["kind"]] = tally.kinds.get(cadence["kind"], 0) + 1
        tally.schedules += len(ids)
        worker = h.worker(h.materializer())
        for kind, value in plan:
            if kind == "aim":
                rows = await h.sql(
                    "SELECT min(next_fire_at) AS t FROM schedules WHERE id = ANY(:ids)"
                    " AND state = 'ACTIVE'",
                    ids=ids,
                )
                target = rows[0]["t"]
                if target is None:
                    continue
                target += TICK * value
                if target > h.clock.now():
                    h.clock.advance_to(target)
            else:
                h.clock.advance(value)
            await worker.run_once()
            tally.scans += 1
            await h.sql(
                "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE status = 'QUEUED'",
                t=h.clock.now(),
            )
        ledger = await h.ledger()
        mine = [o for o in ledger.occurrences if o["schedule_id"] in set(ids)]
        tally.occurrences += len(mine)
        for o in mine:
            tally.dispositions[o["disposition"]] = tally.dispositions.get(o["disposition"], 0) + 1
            assert o["created_at"] >= o["nominal_fire_at"], o
            if o["materialized_at"] is not None:
                assert o["materialized_at"] >= o["nominal_fire_at"], o
        violations = check_ledger(ledger.occurrences, ledger.runs, ledger.sessions)
        assert violations == [], [v.message for v in violations]
    finally:
        await h.close()


@pytest.mark.gate(GATE, facet="materializer")
def test_generated_definitions_never_materialize_early(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    tally = Tally()
    counter = itertools.count()
    base = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

    @seed(SEED)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(defs=st.lists(cadences(base), min_size=1, max_size=4), plan=moves)
    def check(defs: list[dict[str, Any]], plan: list[tuple[str, int]]) -> None:
        number = next(counter)
        shifted = [_shift(d, number) for d in defs]
        asyncio.run(run_example(pg_url, number, shifted, plan, tally))

    check()
    gate_evidence.record("seed", SEED)
    gate_evidence.record("examples", next(counter))
    gate_evidence.record("schedules", tally.schedules)
    gate_evidence.record("scans", tally.scans)
    gate_evidence.record("occurrences_checked", tally.occurrences)
    gate_evidence.record("cadence_kinds", tally.kinds)
    gate_evidence.record("dispositions", tally.dispositions)
    gate_evidence.record("zones", list(ZONES))
    gate_evidence.record(
        "reproduce",
        f"SCHEDULING_GATE_SEED={SEED} .venv/bin/pytest src/gates/checks/test_not_early.py",
    )
    assert tally.occurrences > 0


def _shift(cadence: dict[str, Any], number: int) -> dict[str, Any]:
    """Move a one-time instant into this example's own 400-day window."""
    if cadence["kind"] != "ONCE":
        return cadence
    at = datetime.fromisoformat(cadence["at"]) + timedelta(days=400 * number)
    return {"kind": "ONCE", "at": at.isoformat()}


@pytest.mark.gate(GATE, facet="materializer")
async def test_early_and_on_time_workers_under_the_simulator(
    pg_server: Any, pg_template: str, tmp_path: Any, gate_evidence: GateEvidence
) -> None:
    """Two workers under the deterministic simulator, one scanning 1 us before the
    instant and one at it, in every interleaving: the early scan writes nothing."""
    from simulation import databases, evidence
    from simulation.runner import Simulator
    from simulation.scenarios.materialize import NOT_EARLY
    from simulation.store import FailureStore

    sim = Simulator(
        databases.fresh_databases(pg_server, pg_template), store=FailureStore(tmp_path / "f")
    )
    result = await sim.explore(NOT_EARLY, mode="exhaustive", seed=SEED % 1000, executions=100)
    evidence.attach_evidence(gate_evidence, result, prefix="simulated.")
    assert not result.failures, evidence.failure_report(result)
    assert result.exhausted
