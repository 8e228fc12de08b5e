"""rule.accounting.failures on PostgreSQL: the ``schedule.auto_paused`` event the
scheduler role's accountant emits when a failed run reaches the limit says what
happened - the schedule went from ACTIVE to PAUSED, at the revision it was at, with the
next firing it had and none after - once, beside the accounting event of the run that
reached the limit (count 2 of 2).

``test_rules_admission`` counts the auto-pause event; ``test_rules_events`` reads the
payload of the auto-pause the materializer's misses cause, not the accountant's.

Tests of the test: ``scheduling-gates mutate``
(``svc.accounting_auto_pause_event_before_is_after``).
"""

from __future__ import annotations

import json
from datetime import timedelta
from uuid import UUID

import pytest

from scheduling.domain.cadence import format_instant
from scheduling.domain.events import RUN_ACCOUNTED
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.accounting.failures")]


async def fire(h: MaterializeWorld, sid: UUID) -> UUID:
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    result = await h.materializer().materialize(sid)
    assert result.run_id is not None, result
    return result.run_id


async def test_the_accountants_auto_pause_event_names_the_transition(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(max_consecutive_failures=2)
        accountant = h.scheduler_role(ids=h.world.ids.fork("auto-pause")).accountant
        pending = None
        for n in (1, 2):
            run_id = await fire(h, sid)
            pending = (await h.schedule(sid))["next_fire_at"]
            await h.sql(
                "UPDATE runs SET status = 'FAILED', finished_at = :t, failure = CAST(:f AS jsonb)"
                " WHERE id = :i",
                t=h.clock.now(),
                f=json.dumps({"reason": "schedule.runtime.agent_failed"}),
                i=run_id,
            )
            result = await accountant.account_run(run_id)
            assert result is not None
            assert (result.consecutive_failures, result.auto_paused) == (n, n == 2), result
        row = await h.schedule(sid)
        assert (row["state"], row["pause_reason"], row["next_fire_at"]) == (
            "PAUSED",
            "failure_limit",
            None,
        ), row
        events = (await h.ledger()).of(sid).events
        paused = [e for e in events if e["event_type"] == "schedule.auto_paused"]
        assert len(paused) == 1, [e["event_type"] for e in events]
        payload = paused[0]["payload"]
        assert payload["previous_state"] == "ACTIVE", payload
        assert payload["next_state"] == "PAUSED", payload
        assert payload["revision"] == 1, payload
        assert (payload["tenant_id"], payload["principal_id"]) == (
            WHO.tenant_id,
            WHO.principal_id,
        ), payload
        assert pending is not None
        assert payload.get("previous_next_fire_at", format_instant(pending)) == format_instant(
            pending
        ), payload
        assert payload.get("next_fire_at") is None, payload
        counts = sorted(
            e["payload"]["consecutive_failures"] for e in events if e["event_type"] == RUN_ACCOUNTED
        )
        assert counts == [1, 2], counts
    finally:
        await h.close()
