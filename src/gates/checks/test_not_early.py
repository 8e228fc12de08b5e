"""Materializer facet of gate.schedule.not_early, on PostgreSQL with the schedule worker.

1. A worker scan one microsecond before ``next_fire_at`` writes nothing (every written
   table's row count and the schedule row are unchanged) for a ONCE, DAILY, WEEKLY,
   MONTHLY and YEARLY schedule (the yearly one on a DST-gap date); one microsecond
   later the same worker decides the instant, with ``materialized_at`` equal to it.
2. Property: generated ONCE, DAILY, WEEKLY, MONTHLY and YEARLY definitions over many
   zones (half-hour and 45-minute offsets, DST), each example on its own fresh
   database. Half the examples start just before one of the zone's real DST
   transitions with one definition's wall time inside the gap or fold on that date.
   The worker scans at clock moves aimed at a schedule's ``next_fire_at - 1 us``,
   ``next_fire_at`` and ``+ 1 us`` as well as random jumps: no occurrence has
   ``materialized_at`` (or, for any disposition, ``created_at``) before its nominal
   instant, no scan swallowed an error, and the ledger checker finds nothing. Every
   kind, and a gap and a fold occurrence (classified by the independent civil-time
   oracle), must have been checked, else the gate is ERROR (not covered). Eight
   deterministic aimed examples (every civil kind x {gap, fold}, beside a ONCE) run
   first in every run, so that coverage is reached by construction, not by the seed.

Reproduce: ``SCHEDULING_GATE_SEED=<seed> .venv/bin/pytest src/gates/checks/test_not_early.py``
(``SCHEDULING_GATE_PROFILE=deep`` runs many more examples).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gates.checks.recurrence_support import oracle_resolve, transitions_of
from gates.runner.pytest_plugin import GateEvidence, gate_profile, gate_seed
from scheduling.domain.recurrence.tzif import Transition
from scheduling.domain.recurrence.zones import load_zone
from scheduling.service.materializer import MaterializeStatus
from simulation.engine import evidence
from simulation.engine.checkers import check_ledger
from simulation.engine.simulator import Simulator
from simulation.engine.store import FailureStore
from simulation.engine.targets import fresh_databases
from simulation.provider import DatabaseServer
from simulation.scenarios.materialize import NOT_EARLY
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import principal

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.not_early"
SEED = gate_seed(20261130)
# About 0.3 s per example (fresh database, up to 5 schedules, up to 9 scans).
EXAMPLES = {"quick": 45, "deep": 600}[gate_profile()]
TICK = timedelta(microseconds=1)
NOT_EARLY_LIMIT = 100
KINDS = ("ONCE", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")
CIVIL_CASES = ("gap", "fold")
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
BASE = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
HORIZON = datetime(2036, 1, 1, tzinfo=UTC)


# ---------------------------------------------------------------- 1 us before the instant


async def scan_before_and_at(url: str, cadence: dict[str, Any]) -> dict[str, Any]:
    h = await MaterializeWorld.open(url)
    try:
        sid = await h.create(cadence=cadence)
        fire = await h.next_fire(sid)
        h.clock.advance_to(fire - TICK)
        before, row = await h.counts(), await h.schedule(sid)
        worker = h.worker(h.materializer())
        early = await h.scan(worker)
        direct = await h.materializer().materialize(sid)
        after, row_after = await h.counts(), await h.schedule(sid)
        assert early.scanned == []
        assert direct.status is MaterializeStatus.NOT_DUE
        assert after == before, (before, after)
        assert row_after == row
        h.clock.advance(TICK.total_seconds())
        on_time = await h.scan(worker)
        assert on_time.scanned == [sid]
        assert on_time.count(MaterializeStatus.DECIDED) == 1
        occurrence = (await h.ledger()).of(sid).occurrences[0]
        assert occurrence["nominal_fire_at"] == fire
        assert occurrence["materialized_at"] == fire
        return {"nominal": fire.isoformat(), "rows_before_instant": sum(after.values())}
    finally:
        await h.close()


ONE_MICROSECOND_CASES: dict[str, dict[str, Any]] = {
    "once": {"kind": "ONCE", "at": "2026-03-05T10:15:30.5+05:45"},
    "daily": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
    "weekly": {
        "kind": "WEEKLY",
        "local_time": "06:45:30",
        "weekdays": [3, 6],
        "timezone": "America/St_Johns",
    },
    "monthly": {
        "kind": "MONTHLY",
        "local_time": "23:59:59",
        "days_of_month": [31],
        "last_day": True,
        "timezone": "Asia/Kathmandu",
    },
    # 2026-03-29 01:30 does not exist in London (BST starts at 01:00): the gap's end.
    "yearly": {
        "kind": "YEARLY",
        "local_time": "01:30",
        "dates": [{"month": 3, "day": 29}],
        "timezone": "Europe/London",
    },
}


@pytest.mark.gate(GATE, facet="materializer")
@pytest.mark.parametrize("case", sorted(ONE_MICROSECOND_CASES))
async def test_scan_one_microsecond_early_writes_nothing(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    out = await scan_before_and_at(pg_url, ONE_MICROSECOND_CASES[case])
    gate_evidence.record(case, out)


# ------------------------------------------------------------------------ the property


@dataclass(frozen=True)
class Target:
    """A real DST transition an example starts just before, with a wall time in it."""

    zone: str
    transition: Transition
    case: str
    wall: datetime


@dataclass(frozen=True)
class Example:
    start: datetime
    defs: list[dict[str, Any]]
    plan: list[tuple[str, int, int]]
    target: Target | None


def _transitions() -> dict[str, list[Transition]]:
    out = {}
    for zone in ZONES:
        near = [t for t in transitions_of(zone) if BASE < t.instant < HORIZON]
        if near:
            out[zone] = near
    return out


TRANSITIONS = _transitions()


def _clock(t: time) -> str:
    return t.strftime("%H:%M:%S")


local_times = st.builds(
    lambda h, m, s: f"{h:02d}:{m:02d}:{s:02d}",
    st.integers(0, 23),
    st.sampled_from((0, 15, 30, 59)),
    st.sampled_from((0, 0, 1, 59)),
)


def _selecting(draw: st.DrawFn, kind: str, day: date) -> dict[str, Any]:
    """The selector fields of a ``kind`` cadence that selects local ``day``."""
    if kind == "WEEKLY":
        extra = draw(st.sets(st.integers(1, 7), max_size=2))
        return {"weekdays": sorted(extra | {day.isoweekday()})}
    if kind == "MONTHLY":
        extra = draw(st.sets(st.sampled_from((1, 15, 28, 29, 30, 31)), max_size=2))
        return {"days_of_month": sorted(extra | {day.day}), "last_day": draw(st.booleans())}
    if kind == "YEARLY":
        return {"dates": [{"month": day.month, "day": day.day}]}
    return {}


@st.composite
def cadences(draw: st.DrawFn, start: datetime, zones: tuple[str, ...] = ZONES) -> dict[str, Any]:
    kind = draw(st.sampled_from(KINDS))
    if kind == "ONCE":
        offset = draw(st.integers(60, 6 * 86400))
        minutes = draw(st.sampled_from((0, 330, -210, 345, 780, -600)))
        at = (start + timedelta(seconds=offset)).astimezone(UTC) + timedelta(minutes=minutes)
        sign = "+" if minutes >= 0 else "-"
        text = at.replace(tzinfo=None).isoformat()
        return {
            "kind": "ONCE",
            "at": text + f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}",
        }
    zone = draw(st.sampled_from(zones))
    # Select a local day within the first few days, so the kind fires during the example.
    day = (start.astimezone(load_zone(zone)) + timedelta(days=draw(st.integers(0, 3)))).date()
    payload: dict[str, Any] = {"kind": kind, "local_time": draw(local_times), "timezone": zone}
    return payload | _selecting(draw, kind, day)


@st.composite
def targets(draw: st.DrawFn) -> Target:
    zone = draw(st.sampled_from(sorted(TRANSITIONS)))
    case = draw(st.sampled_from(CIVIL_CASES))  # drawn first: both cases equally often
    t = draw(st.sampled_from([t for t in TRANSITIONS[zone] if t.is_gap == (case == "gap")]))
    low = min(t.wall_before(), t.wall_after())
    width = abs(t.after - t.before)
    wall = low + timedelta(seconds=draw(st.integers(0, width - 1)))
    return Target(zone, t, case, wall.replace(microsecond=0))


@st.composite
def examples(draw: st.DrawFn, zones: tuple[str, ...] = ZONES, targeted: bool = True) -> Example:
    """An example over ``zones``; with ``targeted``, half start just before a real DST
    transition (a test of the test turns targeting off and narrows the zones)."""
    target = draw(st.one_of(st.none(), targets())) if targeted else None
    if target is None:
        start = BASE + timedelta(seconds=draw(st.integers(0, 6 * 365 * 86400)))
    else:
        # Far enough before the transition that the fold's first pass is still ahead.
        ahead = draw(st.integers(3 * 3600, 20 * 3600))
        start = target.transition.instant - timedelta(seconds=ahead)
    defs = draw(st.lists(cadences(start, zones), min_size=1, max_size=4))
    plan: list[tuple[str, int, int]] = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("aim"), st.sampled_from((-1, 0, 1)), st.integers(-1, 4)),
                st.tuples(st.just("jump"), st.integers(1, 3 * 86400), st.just(0)),
            ),
            min_size=3,
            max_size=8,
        )
    )
    if target is not None:
        kind = draw(st.sampled_from(KINDS[1:]))
        aimed = {
            "kind": kind,
            "local_time": _clock(target.wall.time()),
            "timezone": target.zone,
        } | _selecting(draw, kind, target.wall.date())
        defs = [aimed, *defs]
        # Aim at the aimed schedule's instant: 1 us before, at, and past it.
        plan = [("aim", -1, 0), ("aim", 0, 0), *plan]
    return Example(start, defs, plan, target)


def _selector(kind: str, day: date) -> dict[str, Any]:
    """The plainest selector of a ``kind`` cadence that selects local ``day``."""
    if kind == "WEEKLY":
        return {"weekdays": [day.isoweekday()]}
    if kind == "MONTHLY":
        return {"days_of_month": [day.day], "last_day": False}
    if kind == "YEARLY":
        return {"dates": [{"month": day.month, "day": day.day}]}
    return {}


def aimed_examples() -> list[Example]:
    """Deterministic examples that check every kind and a gap and a fold occurrence in
    every run, whatever the seed: for each civil kind x {gap, fold}, a schedule whose
    wall time is the middle of the first such transition after ``BASE`` of a zone
    (zones rotate across kinds), beside a ONCE one hour after the start; the plan fires
    the ONCE, then scans 1 us before, at and 1 us past the aimed instant."""
    zones = [z for z in ZONES if any(t.is_gap for t in TRANSITIONS.get(z, []))]
    out = []
    for k, kind in enumerate(KINDS[1:]):
        for c, case in enumerate(CIVIL_CASES):
            zone = zones[(2 * k + c) % len(zones)]
            t = next(t for t in TRANSITIONS[zone] if t.is_gap == (case == "gap"))
            low, high = sorted([t.wall_before(), t.wall_after()])
            wall = (low + (high - low) / 2).replace(microsecond=0)
            start = t.instant - timedelta(hours=6)
            aimed = {"kind": kind, "local_time": _clock(wall.time()), "timezone": zone}
            once = {"kind": "ONCE", "at": (start + timedelta(hours=1)).isoformat()}
            plan = [("aim", 0, 1), ("aim", -1, 0), ("aim", 0, 0), ("aim", 1, 0)]
            target = Target(zone, t, case, wall)
            out.append(Example(start, [aimed | _selector(kind, wall.date()), once], plan, target))
    return out


@dataclass
class Tally:
    examples: int = 0
    aimed: int = 0
    targeted: dict[str, int] = field(default_factory=dict)
    schedules: int = 0
    scans: int = 0
    occurrences: int = 0
    kinds_generated: dict[str, int] = field(default_factory=dict)
    kinds_checked: dict[str, int] = field(default_factory=dict)
    civil_cases: dict[str, int] = field(default_factory=dict)
    dispositions: dict[str, int] = field(default_factory=dict)
    zones: set[str] = field(default_factory=set)


def _bump(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def civil_case(cadence: dict[str, Any], nominal: datetime) -> str | None:
    """ "gap" or "fold" if the oracle resolves the cadence's wall time to ``nominal`` on
    its local date (or the day before: a gap past midnight) through a DST transition."""
    if cadence["kind"] == "ONCE":
        return None
    wall = time.fromisoformat(cadence["local_time"])
    local_day = nominal.astimezone(load_zone(cadence["timezone"])).date()
    for day in (local_day, local_day - timedelta(days=1)):
        resolved = oracle_resolve(cadence["timezone"], day, wall)
        if resolved is not None and resolved[0] == nominal:
            return None if resolved[1] == "exact" else resolved[1]
    return None


async def run_example(url: str, number: int, example: Example, tally: Tally) -> None:
    who = principal(f"early-{number}")
    h = await MaterializeWorld.open(url, seed=SEED + number, start=example.start, who=who)
    try:
        ids: list[UUID] = []
        cadence_of: dict[UUID, dict[str, Any]] = {}
        for i, cadence in enumerate(example.defs):
            sid = await h.create(who, key=f"e{i}", cadence=cadence)
            ids.append(sid)
            cadence_of[sid] = cadence
            _bump(tally.kinds_generated, cadence["kind"])
            tally.zones.add(cadence.get("timezone", "fixed offset"))
        tally.schedules += len(ids)
        worker = h.worker(h.materializer())
        for move, value, which in example.plan:
            if move == "aim":
                chosen = ids if which < 0 else [ids[which % len(ids)]]
                rows = await h.sql(
                    "SELECT min(next_fire_at) AS t FROM schedules WHERE id = ANY(:ids)"
                    " AND state = 'ACTIVE'",
                    ids=chosen,
                )
                target = rows[0]["t"]
                if target is None:
                    continue
                target += TICK * value
                if target > h.clock.now():
                    h.clock.advance_to(target)
            else:
                h.clock.advance(value)
            report = await h.scan(worker)
            assert report.errors == {}
            tally.scans += 1
            await h.sql(
                "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE status = 'QUEUED'",
                t=h.clock.now(),
            )
        ledger = await h.ledger()
        tally.occurrences += len(ledger.occurrences)
        for o in ledger.occurrences:
            cadence = cadence_of[o["schedule_id"]]
            _bump(tally.dispositions, o["disposition"])
            _bump(tally.kinds_checked, cadence["kind"])
            case = civil_case(cadence, o["nominal_fire_at"])
            if case is not None:
                _bump(tally.civil_cases, case)
            assert o["created_at"] >= o["nominal_fire_at"], o
            if o["materialized_at"] is not None:
                assert o["materialized_at"] >= o["nominal_fire_at"], o
        violations = check_ledger(ledger.occurrences, ledger.runs, ledger.sessions)
        assert violations == [], [v.message for v in violations]
    finally:
        await h.close()


def missing_coverage(tally: Tally) -> list[str]:
    """Kinds and DST cases the property never checked an occurrence of."""
    missing = [f"no {k} occurrence checked" for k in KINDS if not tally.kinds_checked.get(k)]
    return missing + [
        f"no {c} occurrence checked" for c in CIVIL_CASES if not tally.civil_cases.get(c)
    ]


def run_property(
    pg_server: DatabaseServer,
    pg_template: str,
    tally: Tally,
    aimed: list[Example],
    strategy: st.SearchStrategy[Example],
    max_examples: int,
) -> None:
    """The aimed examples, then ``max_examples`` generated ones, each on a fresh database."""
    counter = itertools.count()

    def one(example: Example) -> None:
        number = next(counter)
        tally.examples += 1
        if example.target is not None:
            _bump(tally.targeted, example.target.case)
        url = pg_server.create_database(template=pg_template)
        try:
            asyncio.run(run_example(url, number, example, tally))
        finally:
            pg_server.drop_database(url)

    for example in aimed:
        tally.aimed += 1
        one(example)

    @seed(SEED)
    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(example=strategy)
    def generated(example: Example) -> None:
        one(example)

    generated()


@pytest.mark.gate(GATE, facet="materializer")
def test_generated_definitions_never_materialize_early(
    pg_server: DatabaseServer, pg_template: str, gate_evidence: GateEvidence
) -> None:
    tally = Tally()
    run_property(pg_server, pg_template, tally, aimed_examples(), examples(), EXAMPLES)
    gate_evidence.record("seed", SEED)
    gate_evidence.record("examples", tally.examples)
    gate_evidence.record("aimed_examples", tally.aimed)
    gate_evidence.record("examples_started_before_a_dst_transition", tally.targeted)
    gate_evidence.record("schedules", tally.schedules)
    gate_evidence.record("scans", tally.scans)
    gate_evidence.record("occurrences_checked", tally.occurrences)
    gate_evidence.record("cadence_kinds_generated", tally.kinds_generated)
    gate_evidence.record("cadence_kinds_checked", tally.kinds_checked)
    gate_evidence.record("dst_cases_checked", tally.civil_cases)
    gate_evidence.record("dispositions", tally.dispositions)
    gate_evidence.record("zones", sorted(tally.zones))
    gate_evidence.record(
        "reproduce",
        f"SCHEDULING_GATE_SEED={SEED} .venv/bin/pytest src/gates/checks/test_not_early.py",
    )
    assert tally.occurrences > 0
    missing = missing_coverage(tally)
    if missing:
        gate_evidence.not_covered("; ".join(missing))


@pytest.mark.gate(GATE, facet="materializer")
async def test_early_and_on_time_workers_under_the_simulator(
    pg_server: Any, pg_template: str, tmp_path: Any, gate_evidence: GateEvidence
) -> None:
    """Two workers under the deterministic simulator, one scanning 1 us before the
    instant and one at it, in every interleaving: the early scan writes nothing."""
    sim = Simulator(fresh_databases(pg_server, pg_template), store=FailureStore(tmp_path / "f"))
    # Exhaustive: every interleaving whatever the seed.
    result = await sim.explore(
        NOT_EARLY, mode="exhaustive", seed=SEED % 1000, executions=NOT_EARLY_LIMIT
    )
    evidence.attach_evidence(gate_evidence, result, prefix="simulated.")
    gate_evidence.record(
        "simulated.replay",
        f"scheduling-sim run --scenario {NOT_EARLY.name} --mode exhaustive "
        f"--seed {SEED % 1000} --executions {NOT_EARLY_LIMIT}",
    )
    assert not result.failures, evidence.failure_report(result)
    assert result.exhausted
