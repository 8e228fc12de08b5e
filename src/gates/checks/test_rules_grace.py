"""rule.misfire.grace_window on PostgreSQL: the grace window's edge, both sides.

A daily schedule's first instant is decided by a scan exactly ``misfire_grace_seconds``
after it (inside the window, which includes its end: ADR 2752) and, on a second
database, one microsecond later (outside). Inside: MATERIALIZED with a run. Outside:
MISSED with ``grace_expired``, no session or run, one failure counted, the cadence
advanced to the first future instant. A window that excludes its end, or stretches
past it by any whole unit (a second, a millisecond), is caught on one side or the
other; ``gate.schedule.misfire_bounded`` covers the far side (thousands of instants
behind).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.service.materializer import GRACE_EXPIRED
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import definition

pytestmark = pytest.mark.postgres

RULE = "rule.misfire.grace_window"
GRACE = timedelta(seconds=definition().misfire_grace_seconds)
EDGES = {
    "at_the_window_end": (GRACE, "MATERIALIZED", None),
    "one_microsecond_past_it": (GRACE + timedelta(microseconds=1), "MISSED", GRACE_EXPIRED),
}


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("edge", sorted(EDGES))
async def test_the_grace_window_includes_its_end_and_nothing_past_it(
    pg_url: str, edge: str, gate_evidence: GateEvidence
) -> None:
    lag, disposition, reason = EDGES[edge]
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        first = await h.next_fire(sid)
        assert lag < timedelta(days=1) - GRACE, "the next instant must not be due yet"
        h.clock.advance_to(first + lag)
        await h.scan()
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == [disposition]
        decided = ledger.occurrences[0]
        assert decided["nominal_fire_at"] == first
        assert decided["reason_code"] == reason
        runs = 1 if disposition == "MATERIALIZED" else 0
        assert len(ledger.runs) == len(ledger.sessions) == runs
        schedule = await h.schedule(sid)
        assert schedule["state"] == "ACTIVE"
        assert schedule["consecutive_failures"] == 1 - runs
        assert schedule["next_fire_at"] == first + timedelta(days=1)
        gate_evidence.record(
            edge,
            {
                "lag_seconds": lag.total_seconds(),
                "grace_seconds": GRACE.total_seconds(),
                "disposition": disposition,
            },
        )
    finally:
        await h.close()
