"""The schedule worker as the composition root builds it from ``Settings``
(``bootstrap.build_scheduler(SchedulerSettings.of(settings))``, nothing injected but
the clock and ids), over PostgreSQL through the served control plane's world.

Other checks of these rules inject the worker's settings; these read them from the
``AGENT_SCHEDULE_*`` settings, so a composition root that drops one is caught:

* ``rule.worker.isolated_definitions`` - the bounded batch is ``SCAN_BATCH``: five
  schedules due at once are decided two, two and one by passes of a worker configured
  with a batch of two; and with ``WORKER_CONCURRENCY`` 4 a pass over six due schedules
  returns only once each has been decided, every decision committed and reported.
* ``rule.outbox.finished`` - a run worker on its own login cannot account (it cannot
  touch schedules): the run it ends is accounted by the sweep of the scheduler
  production builds. A run materialized by that scheduler and ended FAILED without
  accounting is taken by the scheduler's next sweep: one schedule_run_finished row for
  its occurrence, the failure counted, nothing left for a second sweep.
* ``rule.worker.wakes_in_time`` - the fallback poll is ``FALLBACK_POLL_SECONDS``: with
  the next firing hours away a worker configured with a 45 s poll sleeps 45 s.

Tests of the test: ``scheduling-gates mutate`` (``wiring.scheduler_scan_batch_default``,
``wiring.scheduler_settings_scan_batch_default``, ``wiring.concurrent_pass_not_awaited``,
``wiring.scheduler_poll_default``, ``wiring.scheduler_pending_accounts_dropped``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.config import Settings
from simulation.worlds.http import HttpWorld, http_world

pytestmark = pytest.mark.postgres


def scheduler(world: HttpWorld, **changes: Any) -> bootstrap.SchedulerRole:
    """The scheduler production builds from ``world.settings`` with ``changes``."""
    settings = Settings.model_validate({**world.settings.model_dump(), **changes})
    role = bootstrap.build_scheduler(
        bootstrap.SchedulerSettings.of(settings),
        clock=world.clock,
        ids=world.ids.fork(f"wired-scheduler-{len(world.roles)}"),
    )
    world.roles.append(role)  # closed with the world
    return role


async def due_together(world: HttpWorld, n: int) -> datetime:
    """``n`` daily schedules due at one instant; that instant."""
    fire = None
    for i in range(n):
        response = await world.create(f"wired-{i}", title=f"Wired {i}")
        assert response.status_code == 201, response.text
        fire = datetime.fromisoformat(response.json()["next_fire_at"])
    assert fire is not None
    return fire


async def decided(world: HttpWorld) -> int:
    rows = await world.sql("SELECT count(*) AS n FROM schedule_occurrences")
    return int(rows[0]["n"])


@pytest.mark.rule("rule.worker.isolated_definitions")
async def test_the_configured_scan_batch_bounds_each_pass(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        fire = await due_together(world, 5)
        role = scheduler(world, scan_batch=2)
        world.clock.advance_to(fire + timedelta(seconds=1))
        sizes = []
        for _ in range(4):
            report = await role.worker.run_once()
            assert report.errors == {}, report.errors
            sizes.append(len(report.results))
        assert sizes == [2, 2, 1, 0], f"passes decided {sizes} with a configured batch of 2"
        assert await decided(world) == 5
    gate_evidence.record("decided_per_pass", sizes)


@pytest.mark.rule("rule.worker.isolated_definitions")
async def test_a_concurrent_pass_returns_once_every_decision_committed(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        fire = await due_together(world, 6)
        # The tenant may hold every run at once: admission admits all six.
        ceilings = {**world.settings.ceilings.model_dump(), "max_active_runs": 100}
        role = scheduler(world, scan_batch=6, worker_concurrency=4, ceilings=ceilings)
        world.clock.advance_to(fire + timedelta(seconds=1))
        report = await role.worker.run_once()
        committed = await decided(world)
        assert report.errors == {}, report.errors
        assert len(report.results) == 6, f"the pass reported {len(report.results)} of 6"
        assert committed == 6, f"the pass returned with {committed} of 6 decisions committed"
    gate_evidence.record("decided", committed)


@pytest.mark.rule("rule.worker.wakes_in_time")
async def test_the_configured_fallback_poll_bounds_the_sleep(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        fire = await due_together(world, 1)
        assert (fire - world.clock.now()).total_seconds() > 3600, "the firing is not hours away"
        slept = {}
        for poll in (45.0, 700.0):
            role = scheduler(world, fallback_poll_seconds=poll)
            slept[poll] = await role.worker.sleep_seconds()
        assert slept == {45.0: 45.0, 700.0: 700.0}, slept
    gate_evidence.record("sleep_seconds_by_poll", slept)


@pytest.mark.rule("rule.outbox.finished")
async def test_a_run_left_unaccounted_is_accounted_by_the_sweep(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        fire = await due_together(world, 1)
        role = scheduler(world)
        world.clock.advance_to(fire + timedelta(seconds=1))
        report = await role.worker.run_once()
        assert len(report.results) == 1, report
        run_id = report.results[0].run_id
        assert run_id is not None, report
        # Ended by a run worker on its own login: the run row only, no accounting.
        world.clock.advance(60)
        await world.sql(
            "UPDATE runs SET status = 'FAILED', finished_at = :t,"
            ' failure = \'{"reason": "schedule.runtime.agent_failed"}\' WHERE id = :i',
            t=world.clock.now(),
            i=run_id,
        )
        swept = await role.worker.account()
        again = await role.worker.account()
        rows = await world.sql(
            "SELECT o.kind, s.consecutive_failures FROM schedule_outbox o"
            " JOIN schedules s ON s.id = o.schedule_id"
        )
    assert swept == 1, f"the scheduler's sweep accounted {swept} runs"
    assert again == 0, f"a second sweep accounted {again} more"
    assert [(r["kind"], r["consecutive_failures"]) for r in rows] == [
        ("schedule_run_finished", 1)
    ], rows
    gate_evidence.record("accounted_by_sweep", swept)
