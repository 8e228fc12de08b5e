"""Tests of the tests: gate checks that scan through the harness fail when the schedule
worker swallows materialization errors (the reviewer's sabotage), instead of passing on
a ledger that happens to look fine.

Two injected breakages, never a product change (the materializer class is patched for
the duration of one test):

* ``odd_schedules_raise`` - every second schedule the materializer is asked about
  raises RuntimeError (the worker isolates it and carries on);
* ``crash_after_commit`` - every materialization commits, then raises: the ledger is
  perfect and only ``report.errors`` tells.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

import gates.checks.test_authority_fresh as authority_fresh
import gates.checks.test_not_early as not_early
import gates.checks.test_offline_results as offline_results
import gates.checks.test_revision_pinned as revision_pinned
from gates.runner.pytest_plugin import GateEvidence
from scheduling.service.materializer import (
    MaterializeResult,
    MaterializeStatus,
    ScheduleMaterializer,
)
from simulation.worlds.materialize import MaterializeWorld, SwallowedScanErrors

pytestmark = pytest.mark.postgres

REAL = ScheduleMaterializer.materialize


class Sabotage:
    def __init__(self) -> None:
        self.seen: list[UUID] = []
        self.raised: list[UUID] = []


@pytest.fixture
def odd_schedules_raise(monkeypatch: pytest.MonkeyPatch) -> Sabotage:
    sabotage = Sabotage()

    async def materialize(self: ScheduleMaterializer, schedule_id: UUID) -> MaterializeResult:
        if schedule_id not in sabotage.seen:
            sabotage.seen.append(schedule_id)
        if sabotage.seen.index(schedule_id) % 2 == 1:
            sabotage.raised.append(schedule_id)
            raise RuntimeError("injected: odd-numbered schedule")
        return await REAL(self, schedule_id)

    monkeypatch.setattr(ScheduleMaterializer, "materialize", materialize)
    return sabotage


@pytest.fixture
def crash_after_commit(monkeypatch: pytest.MonkeyPatch) -> Sabotage:
    sabotage = Sabotage()

    async def materialize(self: ScheduleMaterializer, schedule_id: UUID) -> MaterializeResult:
        result = await REAL(self, schedule_id)
        if result.status is MaterializeStatus.DECIDED:
            sabotage.raised.append(schedule_id)
            raise RuntimeError("injected: crashed after the commit")
        return result

    monkeypatch.setattr(ScheduleMaterializer, "materialize", materialize)
    return sabotage


def _daily(at: str, zone: str = "Europe/Paris") -> dict[str, str]:
    return {"kind": "DAILY", "local_time": at, "timezone": zone}


async def test_not_early_property_example_fails_when_odd_schedules_raise(
    pg_url: str, odd_schedules_raise: Sabotage
) -> None:
    example = not_early.Example(
        start=datetime(2026, 3, 2, 8, 0, tzinfo=UTC),
        defs=[_daily("09:00"), _daily("10:00"), _daily("11:00"), _daily("12:00")],
        plan=[("jump", 2 * 86400, 0), ("aim", 0, -1), ("aim", 1, -1)],
        target=None,
    )
    with pytest.raises(SwallowedScanErrors) as caught:
        await not_early.run_example(pg_url, 0, example, not_early.Tally())
    assert odd_schedules_raise.raised
    assert set(caught.value.errors) <= set(odd_schedules_raise.raised)
    assert set(caught.value.errors.values()) == {"RuntimeError"}


async def test_not_early_one_microsecond_check_fails_on_a_crash_after_commit(
    pg_url: str, crash_after_commit: Sabotage
) -> None:
    with pytest.raises(SwallowedScanErrors):
        await not_early.scan_before_and_at(pg_url, not_early.ONE_MICROSECOND_CASES["weekly"])
    assert len(crash_after_commit.raised) == 1


def test_not_early_coverage_guard_names_what_was_never_checked() -> None:
    tally = not_early.Tally(kinds_checked={"ONCE": 3, "DAILY": 2}, civil_cases={"fold": 1})
    assert not_early.missing_coverage(tally) == [
        "no WEEKLY occurrence checked",
        "no MONTHLY occurrence checked",
        "no YEARLY occurrence checked",
        "no gap occurrence checked",
    ]
    full = not_early.Tally(
        kinds_checked={k: 1 for k in not_early.KINDS}, civil_cases={"gap": 1, "fold": 1}
    )
    assert not_early.missing_coverage(full) == []


async def test_revision_pinned_fails_on_a_crash_after_commit(
    pg_url: str, crash_after_commit: Sabotage
) -> None:
    with pytest.raises(SwallowedScanErrors):
        await revision_pinned.test_first_occurrence_keeps_revision_one(pg_url, GateEvidence())
    assert crash_after_commit.raised


async def test_offline_results_fails_on_a_crash_after_commit(
    pg_url: str, crash_after_commit: Sabotage
) -> None:
    with pytest.raises(SwallowedScanErrors):
        await offline_results.test_every_disposition_recovered_from_paginated_reads(
            pg_url, GateEvidence()
        )
    assert crash_after_commit.raised


async def test_authority_fresh_fails_on_a_crash_after_commit(
    pg_url: str, crash_after_commit: Sabotage
) -> None:
    with pytest.raises(SwallowedScanErrors):
        await authority_fresh.test_due_occurrence_fails_closed(
            pg_url, "scope_revoked", GateEvidence()
        )
    assert crash_after_commit.raised


async def test_harness_workers_are_strict_unless_errors_are_expected(
    pg_url: str, odd_schedules_raise: Sabotage
) -> None:
    """The shared harness itself (what no_overlap and every other harness user get):
    ``run_once``, ``scan`` and the ``run`` loop fail; ``expect_errors=True`` opts out."""
    h = await MaterializeWorld.open(pg_url)
    try:
        ids = [await h.create(key=f"s{i}", cadence=_daily(f"0{i + 6}:00")) for i in range(2)]
        h.clock.advance_to(await h.next_fire(ids[1]) + timedelta(seconds=1))
        with pytest.raises(SwallowedScanErrors):
            await h.worker(h.materializer()).run_once()
        h.clock.advance(86400)
        with pytest.raises(SwallowedScanErrors):
            await h.scan()
        h.clock.advance(86400)
        lenient = h.worker(h.materializer(), expect_errors=True)
        report = await lenient.run_once()
        assert set(report.errors.values()) == {"RuntimeError"}
        h.clock.advance(86400)  # past the failure backoff: the schedule is retried
        with pytest.raises(SwallowedScanErrors):
            await h.scan(lenient)  # scan() is strict unless told otherwise
        h.clock.advance(86400)
        assert (await h.scan(expect_errors=True)).errors
        # The production loop logs a failed pass and carries on; the strict worker
        # raises once it stops.
        h.clock.advance(86400)
        looping = h.worker(h.materializer())
        passes = 0

        def stop() -> bool:
            nonlocal passes
            passes += 1
            return passes > 2

        with pytest.raises(SwallowedScanErrors):
            await asyncio.wait_for(looping.run(stop), timeout=30)
    finally:
        await h.close()
