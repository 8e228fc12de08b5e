"""``rule.accounting.failures``: the failure a ``schedule.run_accounted`` event records is
the one the run worker classified, for runs the run worker production builds ended.

The other accounting checks write the failure column directly; here a scheduled run is
executed end to end on PostgreSQL (materializer, run worker with its post-run
accounting hook, scripted agent) and the accounted event's failure must be exactly the
sanitized classification of what ended the run:

* the agent gave up (``[script:fail]``, whose ``Fail`` carries ``ScriptedFailure``):
  ``{"reason": schedule.runtime.agent_failed, "error_class": "ScriptedFailure"}`` - the
  agent's own class, not a generic one put in its place;
* a bound ended it (``[script:spend]`` past its USD 2): ``{"reason":
  schedule.runtime.cost_limit, "error_class": "RunLimitExceeded"}``;
* a completed run: no failure, and its count resets.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.events import RUN_ACCOUNTED
from scheduling.ports.runtime import QueueCapacity
from scheduling.runtime import AGENT_FAILED, COST_LIMIT
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.runtime import run_worker

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.accounting.failures")]

CASES: dict[str, tuple[str, str, dict[str, Any] | None, int]] = {
    "agent_failed": (
        "fail",
        "FAILED",
        {"reason": AGENT_FAILED, "error_class": "ScriptedFailure"},
        1,
    ),
    "cost_limit": (
        "spend",
        "FAILED",
        {"reason": COST_LIMIT, "error_class": "RunLimitExceeded"},
        1,
    ),
    "completed": ("succeed", "COMPLETED", None, 0),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_accounted_failure_is_what_ended_the_run(pg_url: str, case: str) -> None:
    script, status, failure, count = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(key=case, instruction=f"Report. [script:{script}]")
        h.clock.advance_to(await h.next_fire(sid))
        h.clock.advance(1)
        made = await h.materializer().materialize(sid)
        assert made.run_id is not None, made
        # The run worker production builds, its post-run accounting hook wired.
        worker = run_worker(h.admin, h.clock, "accounted", capacity=QueueCapacity(4, 1, 1))
        done = await worker.run_once()
        assert done is not None
        assert (done.run_id, done.status) == (str(made.run_id), status), done
        accounted = [
            e["payload"]
            for e in (await h.ledger()).of(sid).events
            if e["event_type"] == RUN_ACCOUNTED
        ]
        assert len(accounted) == 1, accounted
        assert accounted[0]["run_status"] == status
        assert accounted[0]["failure"] == failure, (case, accounted[0]["failure"])
        assert accounted[0]["consecutive_failures"] == count
        row = (await h.sql("SELECT failure FROM runs WHERE id = :i", i=made.run_id))[0]
        assert row["failure"] == failure, (case, row["failure"])
    finally:
        await h.close()
