"""Decisions that must count no failure: an instant already decided, and an admission
RETRY.

gate.schedule.materialize_once: a stale ``next_fire_at`` cache re-presents an instant a
committed occurrence already decided, at a moment the verdict would now be a failure
(the principal was disabled after the first decision). The worker that meets the
uniqueness key returns ALREADY_DECIDED with the committed occurrence and makes no
second effect: no failure is counted for the instant decided before (the counter stays
0 and a schedule whose failure limit is 1 stays ACTIVE, not auto-paused), no event is
appended, and the cache moves past now.

rule.accounting.failures: a concurrency denial (admission RETRY) is none of the
dispositions that count a failure: a schedule denied again and again (a tenant allowed
one active run, its slot held) keeps its failure counter at 0 and stays ACTIVE and
due, though its failure limit is 1.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.service.materializer import MaterializeStatus
from scheduling.testing import ConfiguredTenantConfiguration
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import CEILINGS

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.materialize_once")
async def test_an_already_decided_instant_counts_no_failure(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(max_consecutive_failures=1)
        nominal = await h.next_fire(sid)
        h.clock.advance_to(nominal + timedelta(seconds=2))
        first = await h.scan()
        assert [r.status for r in first.results] == [MaterializeStatus.DECIDED]
        (decided,) = (await h.ledger()).of(sid).occurrences
        assert decided["disposition"] == "MATERIALIZED", decided
        # The principal is disabled: a new verdict would be AUTHORIZATION_FAILED.
        await h.set_principal(enabled=False)
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=nominal, i=sid)
        before = await h.schedule(sid)
        events_before = len((await h.ledger()).of(sid).events)
        h.clock.advance(5)
        again = await h.scan()
        assert [r.status for r in again.results] == [MaterializeStatus.ALREADY_DECIDED]
        result = again.results[0]
        assert result.occurrence is not None
        assert result.occurrence.id == decided["id"]
        after = await h.schedule(sid)
        assert after["consecutive_failures"] == before["consecutive_failures"] == 0, after
        assert after["state"] == "ACTIVE", after
        assert after["pause_reason"] is None, after
        assert after["next_fire_at"] > h.clock.now(), after
        ledger = (await h.ledger()).of(sid)
        assert len(ledger.occurrences) == 1, ledger.occurrences
        assert len(ledger.events) == events_before, ledger.event_types()
    finally:
        await h.close()


@pytest.mark.rule("rule.accounting.failures")
async def test_an_admission_retry_counts_no_failure(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        h.tenants = ConfiguredTenantConfiguration(
            default=CEILINGS.model_copy(update={"max_active_runs": 1})
        )
        holder = await h.create(key="holder", title="holder")
        denied = await h.create(key="denied", title="denied", max_consecutive_failures=1)
        h.clock.advance_to(await h.next_fire(holder) + timedelta(seconds=1))
        assert await h.next_fire(denied) <= h.clock.now()
        first = await h.materializer().materialize(holder)
        assert first.status is MaterializeStatus.DECIDED, first
        before = await h.schedule(denied)
        for _ in range(3):
            result = await h.materializer().materialize(denied)
            assert result.status is MaterializeStatus.RETRY, result
            h.clock.advance(1)
        after = await h.schedule(denied)
        assert after["consecutive_failures"] == before["consecutive_failures"] == 0, after
        assert after["state"] == "ACTIVE", after
        assert after["next_fire_at"] == before["next_fire_at"] <= h.clock.now(), after
        assert (await h.ledger()).of(denied).occurrences == []
    finally:
        await h.close()
