"""``rule.admission.dispositions``: the cost a finished scheduled run counts is what the
run worker charged it, written by the run worker itself.

The other admission checks write a run's end (status, finished_at, cost) directly,
since the run worker's usage is not what they are about; here the end comes from the
run worker production builds, the scripted agent spending USD 1 per model call, and
the tenant's next firing (which reserves the default USD 2 max_cost) is decided
against a daily ceiling of USD 3 on PostgreSQL:

* a run that completed after spending USD 1: 1 + 2 = 3 reaches the ceiling, admitted;
* a run that completed after spending USD 2: 2 + 2 = 4, refused MISSED daily_cost;
* a run that failed at its USD 2 cost limit: its USD 2 counts too, refused.

So the run worker must commit the charged cost on the run row and a finished_at on
every terminal status, completed ones included (a run finished without either would
vanish from the rolling day and let the tenant overspend).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from gates.checks.admission_support import ceilings, fire, outcome
from scheduling.domain.cadence import format_instant
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import COST_LIMIT
from scheduling.service.admission import DAILY_COST
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_worker

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.admission.dispositions")]

# (script, the first run's status, its failure reason, its cost, the next firing)
CASES: dict[str, tuple[str, str, str | None, Decimal, tuple[str, str | None]]] = {
    "completed_spending_1": ("spend:1", "COMPLETED", None, Decimal(1), ("MATERIALIZED", None)),
    "completed_spending_2": (
        "spend:2",
        "COMPLETED",
        None,
        Decimal(2),
        ("MISSED", DAILY_COST),
    ),
    "failed_at_its_cost_limit": (
        "spend",
        "FAILED",
        COST_LIMIT,
        Decimal(2),
        ("MISSED", DAILY_COST),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_run_workers_charge_counts_in_the_rolling_day(pg_url: str, case: str) -> None:
    script, status, reason, cost, expected = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ceilings(max_daily_cost=Decimal(3))
        at = h.clock.now() + timedelta(seconds=30)
        sid = await h.create(
            key="spender",
            cadence={"kind": "ONCE", "at": format_instant(at)},
            instruction=f"Spend. [script:{script}]",
        )
        h.clock.advance_to(at + timedelta(seconds=1))
        made = await h.materializer().materialize(sid)
        assert made.status is MaterializeStatus.DECIDED, made
        assert made.run_id is not None, made
        worker = run_worker(h.admin, h.clock, "spender", capacity=QueueCapacity(4, 1, 1))
        done = await worker.run_once()
        assert done is not None
        assert (done.run_id, done.status, done.reason_code) == (str(made.run_id), status, reason)
        row = (await h.sql("SELECT * FROM runs WHERE id = :i", i=made.run_id))[0]
        # The row the worker left: its charged cost and the instant it ended.
        assert row["status"] == status
        assert Decimal(row["cost"]) == cost, (case, row["cost"], row["usage"])
        assert row["finished_at"] == done.ended_at, (case, row["finished_at"])
        # The tenant's next firing is admitted or refused by that committed cost.
        nxt = await fire(h, "next")
        assert outcome(nxt) == expected, (case, outcome(nxt))
    finally:
        await h.close()
