"""The schedule worker's transient retry against errors the database really raises, over
PostgreSQL through the composition root (``bootstrap.build_scheduler`` from settings).

A trigger on ``schedule_occurrences`` makes one schedule's materialization fail with a
chosen SQLSTATE every time, counting each attempt in a sequence (``nextval`` survives
the rollback). Two siblings are due at the same pass, after it.

* ``rule.worker.isolated_definitions``: a failure the database raises about the work
  (a trigger's ``RAISE``, P0001; a foreign-key violation, 23503) is the definition's,
  not the connection's: it is tried once, never retried, set aside for the configured
  ``failure_backoff_seconds`` (5 s here, not the 60 s default) while both siblings
  materialize in the same pass; once the fault is gone it materializes when that
  backoff ends.
* ``rule.connection.refusal_waited_out``: a serialization failure (40001) is transient
  but not a refusal: with ``AGENT_SCHEDULE_TRANSIENT_RETRY_ATTEMPTS`` of 6 it is tried
  exactly 7 times, sleeping on the Clock more than nothing and at most 6 times
  ``TRANSIENT_RETRY_MAX_SECONDS`` in all (the sum is what the check sees, not each
  delay; the jitter comes from the world's fixed seed, so the uncapped-delay mutant's
  kill does not vary between runs), then the pass ends with the schedule reported
  unavailable, not set aside.
* ``rule.admission.retry_backoff``: a concurrency denial (a tenant allowed one active
  run, two schedules due at once) leaves the second due and set aside for exactly the
  configured ``AGENT_SCHEDULE_ADMISSION_BACKOFF_SECONDS`` (0.5 s, not the 1 s default
  nor the failure backoff): still deferred 0.4 s later, tried again at 0.5 s.

Tests of the test: ``scheduling-gates mutate`` (``retry.any_database_error_transient``,
``retry.any_conflict_transient``, ``scheduler.failure_backoff_ignored``,
``retry.one_attempt_too_many``, ``retry.every_transient_waited_out``,
``retry.delay_uncapped``, ``scheduler.transient_retry_ignored``,
``storage.admission_backoff_ignored``, ``scheduler.admission_backoff_swapped``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.config import Settings
from simulation.worlds.http import HttpWorld, http_world

pytestmark = pytest.mark.postgres

FAILURE_BACKOFF = 5.0
ATTEMPTS = 6
MAX_DELAY = 0.1
ADMISSION_BACKOFF = 0.5


async def plant(world: HttpWorld, schedule_id: str, sqlstate: str) -> None:
    """Every occurrence insert of ``schedule_id`` raises ``sqlstate``, counted first."""
    await world.sql("CREATE SEQUENCE planted_attempts")
    await world.sql(
        f"""CREATE FUNCTION planted_failure() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER AS $$
        BEGIN
          PERFORM nextval('planted_attempts');
          RAISE EXCEPTION 'planted failure' USING ERRCODE = '{sqlstate}';
        END $$"""
    )
    await world.sql(
        f"""CREATE TRIGGER planted_failure BEFORE INSERT ON schedule_occurrences
        FOR EACH ROW WHEN (NEW.schedule_id = '{schedule_id}')
        EXECUTE FUNCTION planted_failure()"""
    )


async def attempts(world: HttpWorld) -> int:
    rows = await world.sql("SELECT last_value, is_called FROM planted_attempts")
    return int(rows[0]["last_value"]) if rows[0]["is_called"] else 0


async def decided(world: HttpWorld) -> set[str]:
    rows = await world.sql("SELECT schedule_id FROM schedule_occurrences")
    return {str(r["schedule_id"]) for r in rows}


async def due_three(world: HttpWorld) -> tuple[str, list[str], datetime]:
    """A schedule due at 08:59 (first in the scan) and two siblings due at 09:00."""
    made = []
    for n, at in enumerate(("08:59", "09:00", "09:00")):
        cadence = {"kind": "DAILY", "local_time": at, "timezone": "Europe/Paris"}
        response = await world.create(f"retry-{n}", cadence=cadence, title=f"Retry {n}")
        assert response.status_code == 201, response.text
        made.append(response.json())
    fire = max(datetime.fromisoformat(m["next_fire_at"]) for m in made)
    return str(made[0]["id"]), [str(m["id"]) for m in made[1:]], fire


def scheduler(world: HttpWorld, **changes: Any) -> bootstrap.SchedulerRole:
    """The scheduler production builds from ``world.settings`` with ``changes``."""
    settings = Settings.model_validate({**world.settings.model_dump(), **changes})
    role = bootstrap.build_scheduler(
        bootstrap.SchedulerSettings.of(settings),
        clock=world.clock,
        ids=world.ids.fork(f"retry-scheduler-{len(world.roles)}"),
    )
    world.roles.append(role)  # closed with the world
    return role


@pytest.mark.rule("rule.worker.isolated_definitions")
@pytest.mark.parametrize("sqlstate", ["P0001", "23503"])
async def test_a_failure_the_database_raises_about_the_work_is_isolated(
    pg_url: str, sqlstate: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        bad, siblings, fire = await due_three(world)
        await plant(world, bad, sqlstate)
        role = scheduler(world, failure_backoff_seconds=FAILURE_BACKOFF)
        world.clock.advance_to(fire + timedelta(seconds=1))
        first = await role.worker.run_once()
        tried = await attempts(world)
        assert tried == 1, f"a {sqlstate} failure was retried: {tried} attempts"
        assert first.unavailable == {}, f"a {sqlstate} failure was taken for the database's"
        assert set(first.errors) == {UUID(bad)}, first.errors
        assert await decided(world) == set(siblings), "the siblings were not decided"

        # Set aside for the configured backoff: still inside it, the schedule is left
        # alone even with the fault gone; when it ends, the schedule materializes.
        await world.sql("DROP TRIGGER planted_failure ON schedule_occurrences")
        world.clock.advance(FAILURE_BACKOFF - 1)
        inside = await role.worker.run_once()
        assert UUID(bad) in inside.deferred, "not set aside"
        assert bad not in await decided(world)
        world.clock.advance(1)
        after = await role.worker.run_once()
        assert after.errors == {}, after.errors
        assert bad in await decided(world), "still set aside after the configured backoff"
    gate_evidence.record(f"attempts_{sqlstate}", tried)


@pytest.mark.rule("rule.connection.refusal_waited_out")
async def test_a_serialization_failure_is_retried_exactly_the_configured_times(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        bad, _, fire = await due_three(world)
        await plant(world, bad, "40001")
        role = scheduler(
            world,
            transient_retry_attempts=ATTEMPTS,
            transient_retry_base_seconds=MAX_DELAY,
            transient_retry_max_seconds=MAX_DELAY,
        )
        world.clock.advance_to(fire + timedelta(seconds=1))
        before = world.clock.now()
        report = await role.worker.run_once()
        slept = (world.clock.now() - before).total_seconds()
        tried = await attempts(world)
    assert tried == ATTEMPTS + 1, f"{tried} attempts for {ATTEMPTS} configured retries"
    # Each delay is full jitter under the cap: never more than the cap each.
    assert 0 < slept <= ATTEMPTS * MAX_DELAY, f"slept {slept} s on the Clock"
    # Transient: the database's, so nothing is set aside and the pass ends.
    assert report.errors == {}, report.errors
    assert set(report.unavailable) == {UUID(bad)}, report.unavailable
    gate_evidence.record("attempts", tried)
    gate_evidence.record("slept_seconds", slept)


@pytest.mark.rule("rule.admission.retry_backoff")
async def test_a_concurrency_denial_waits_the_configured_admission_backoff(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        made = []
        for n in range(2):
            response = await world.create(f"admission-{n}", title=f"Admission {n}")
            assert response.status_code == 201, response.text
            made.append(str(response.json()["id"]))
        fire = datetime.fromisoformat(response.json()["next_fire_at"])
        ceilings = {**world.settings.ceilings.model_dump(), "max_active_runs": 1}
        role = scheduler(
            world,
            ceilings=ceilings,
            admission_backoff_seconds=ADMISSION_BACKOFF,
            failure_backoff_seconds=60.0,
        )
        world.clock.advance_to(fire + timedelta(seconds=1))
        first = await role.worker.run_once()
        assert first.errors == {}, first.errors
        admitted = await decided(world)
        assert len(admitted) == 1, "not exactly one of the two admitted"
        denied = UUID(next(sid for sid in made if sid not in admitted))
        world.clock.advance(ADMISSION_BACKOFF - 0.1)
        inside = await role.worker.run_once()
        assert denied in inside.deferred, "a denied schedule was not set aside"
        world.clock.advance(0.1)
        after = await role.worker.run_once()
        assert denied not in after.deferred, "still set aside after the admission backoff"
        assert denied in after.scanned, "not tried again when the admission backoff ended"
        assert await decided(world) == admitted, "a denial wrote an occurrence"
    gate_evidence.record("admission_backoff_seconds", ADMISSION_BACKOFF)
