"""rule.admission.dispositions: where the rate window begins. The window is the minute
that ends at the decision, open at its start: a scheduled run created exactly one
minute before the decision no longer counts ("a run stops counting a minute after its
creation"), so the minute holds 60 seconds of creations, not 60 s and a microsecond.
The existing check probes a microsecond either side of that instant; this one probes
the instant itself (mutant ``domain.rate_window_first_instant_pg``: ``created_at >=``
in the PostgreSQL usage read)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from gates.checks.admission_support import ceilings, decide, end_run, once, outcome, scheduled_run
from scheduling.service.admission import RATE
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

TICK = timedelta(microseconds=1)


@pytest.mark.rule("rule.admission.dispositions")
async def test_a_run_created_exactly_a_minute_ago_no_longer_counts(pg_url: str) -> None:
    """One materialization a minute. The first run (ended at once, so only the rate
    window can count it) was created at T; a firing at T + 60 s - 1 us is refused as
    rated, a firing at exactly T + 60 s is admitted."""
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_materializations_per_minute=1)
        start = h.clock.now()
        inside = await once(h, "edge-inside", start + timedelta(seconds=40))
        edge = await once(h, "edge-exact", start + timedelta(seconds=50))
        first = await scheduled_run(h, "edge-first")
        await end_run(h, first, "FAILED", Decimal(0))
        (row,) = await h.sql("SELECT created_at FROM runs WHERE id = :i", i=first)
        minute_later = row["created_at"] + timedelta(minutes=1)
        assert outcome(await decide(h, inside, minute_later - TICK)) == ("MISSED", RATE)
        assert outcome(await decide(h, edge, minute_later)) == ("MATERIALIZED", None), (
            "a run created exactly a minute before the decision still counted in its rate"
        )
    finally:
        await h.close()
