"""gate.schedule.materialize_once at its idempotency key: the occurrence uniqueness
``(schedule_id, nominal_fire_at)``. In the simulator's races the schedule row lock
always settles the race first, so the key itself was never reached. Here a stale
``next_fire_at`` cache (the spec's "cached state") re-presents an instant a committed
occurrence already decided, and two schedule workers (``ScheduleWorker.run_once``,
strict: a swallowed error fails) race on it: the worker that gets the row must reach
the uniqueness constraint, return ALREADY_DECIDED with the committed occurrence and
write no second occurrence, session, run, event or outcome row; the other returns
without effect; the cache is advanced past now.

The race runs twice, once per shape of the decision statement (ADR 2330): with the
first run still in flight the re-presented instant is an overlap skip (the outcome row
and process events are its conditional writes), and with that run finished and
accounted it would queue a run (session, its three session events, run, checkpoint
and process events). Each conditional write then has a shape in which a decision that
writes it unconditionally adds a row (``counts`` plus ``schedule_outbox``) or raises
(an orphan's foreign key, which the strict workers do not swallow). Mutants:
``materialization.decision_*`` in src/gates/runner/mutants.toml (docs/mutation.md).

Test of the test: tests/integration/test_materialize_uniqueness_sensitivity.py (an
occurrence insert that raises on a decided instant instead of returning it)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.materialize_once")
async def test_a_decided_instant_meets_the_uniqueness_key_not_a_second_effect(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await check_uniqueness_race(pg_url, gate_evidence)


@pytest.mark.gate("gate.schedule.materialize_once")
async def test_a_decided_instant_whose_run_finished_meets_the_key_not_a_second_run(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    await check_uniqueness_race(pg_url, gate_evidence, run_finished=True)


async def written(h: MaterializeWorld) -> dict[str, int]:
    """Row counts of every table a decision writes: the world's tables and the outcome
    row's ``schedule_outbox`` (which only a decision that queues no run writes)."""
    rows = await h.sql("SELECT count(*) AS n FROM schedule_outbox")
    return {**await h.counts(), "schedule_outbox": int(rows[0]["n"])}


async def check_uniqueness_race(
    pg_url: str, gate_evidence: GateEvidence, *, run_finished: bool = False
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        nominal = await h.next_fire(sid)
        h.clock.advance_to(nominal + timedelta(seconds=2))
        first = await h.scan()
        assert [r.status for r in first.results] == [MaterializeStatus.DECIDED]
        decided = (await h.ledger()).of(sid).occurrences
        assert len(decided) == 1
        shape = "overlap_skip"
        if run_finished:
            # The first run finishes and is accounted (by the product's sweep, before
            # the counts are read), so the re-presented instant's verdict is a new run:
            # the statement carries the run's conditional writes, not the outcome row.
            shape = "queued_run"
            await h.sql(
                "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :r",
                t=h.clock.now(),
                r=decided[0]["run_id"],
            )
            assert await h.worker(h.materializer()).account() == 1
        # The cache goes stale: it points at the decided instant again.
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=nominal, i=sid)
        before = await written(h)
        reports = await asyncio.gather(
            h.scan(h.worker(h.materializer())), h.scan(h.worker(h.materializer()))
        )
        after = await written(h)
        statuses = sorted(r.status.value for report in reports for r in report.results)
        assert statuses.count(MaterializeStatus.ALREADY_DECIDED.value) == 1, statuses
        assert MaterializeStatus.DECIDED.value not in statuses, statuses
        winner = next(
            r
            for report in reports
            for r in report.results
            if r.status is MaterializeStatus.ALREADY_DECIDED
        )
        assert winner.occurrence is not None
        assert winner.occurrence.id == decided[0]["id"]
        assert after == before, {k: after[k] - before[k] for k in after}
        schedule = await h.schedule(sid)
        assert schedule["next_fire_at"] > h.clock.now()
        again = await h.scan()
        assert again.results == []
        if run_finished:
            # The shape the race relied on, shown: in this world the schedule's next
            # instant is decided into a queued run (neither an overlap skip nor an
            # admission reject), so the re-presented instant's statement carried the
            # run's writes. Without it a changed verdict would quietly drop them.
            h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=2))
            following = await h.scan()
            assert [r.status for r in following.results] == [MaterializeStatus.DECIDED]
            occurrences = (await h.ledger()).of(sid).occurrences
            assert len(occurrences) == 2, occurrences
            assert occurrences[-1]["run_id"] is not None, occurrences[-1]
        gate_evidence.record(
            "stale_cache_race",
            {
                "workers": 2,
                "decision_shape": shape,
                "statuses": statuses,
                "rows_written": {k: after[k] - before[k] for k in after},
                "driven_by": "ScheduleWorker.run_once (strict)",
            },
        )
    finally:
        await h.close()
