"""The queued run a MATERIALIZED decision writes, read back from PostgreSQL.

Two daily schedules fire at one instant with the scheduler's clock 7 s after it, so the
materialization time (``now``) and the nominal instant differ and a value taken from
the wrong one shows; the run timeout (1234 s) differs from the misfire grace (900 s),
so a value taken from the wrong field shows too. The second schedule's revision is an
older, unpinned one (its definition stored without ``authority_version``, which the
materializer keeps under the scope-only rule), so an authority version taken from the
revision instead of the one resolved at firing shows.

* rule.materialize.run_linkage: the instruction is the session's durable model
  context: the run's seed checkpoint (seq 0, fencing token 0) names the run's session
  and, as its context sequence, exactly the context-only user message (seq 2), not
  the run.queued event after it; run.queued records the occurrence's authority
  version (also for the unpinned revision) and says what the run row says: priority
  10, scheduled_for the materialization time and deadline_at that time plus
  run_timeout_seconds.
* gate.schedule.run_bounded (check facet): the run is stamped with the revision's
  limits, its ``run_timeout_seconds`` in the run metadata (not another bound of the
  revision) and the deadline ``materialized_at + run_timeout_seconds``.
* rule.queue.eligibility: scheduled_for is queue eligibility, not the recurrence: the
  run is eligible from its materialization time (``scheduled_for = materialized_at``),
  never stamped with the nominal instant, at the async priority 10.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from scheduling.domain.cadence import format_instant
from simulation.worlds.materialize import MaterializeWorld
from simulation.worlds.service import LIMITS

pytestmark = pytest.mark.postgres

TIMEOUT = 1234
GRACE = 900
LATE = timedelta(seconds=7)


@dataclass
class Materialized:
    occurrence: dict[str, Any]
    run: dict[str, Any]
    events: list[dict[str, Any]]
    """The run's session events, in seq order."""
    checkpoints: list[dict[str, Any]]


async def materialize_two(pg_url: str) -> list[Materialized]:
    """A pinned and an unpinned schedule, both materialized 7 s after their instant."""
    h = await MaterializeWorld.open(pg_url)
    try:
        pinned = await h.create(run_timeout_seconds=TIMEOUT, misfire_grace_seconds=GRACE)
        unpinned = await h.create(run_timeout_seconds=TIMEOUT, misfire_grace_seconds=GRACE)
        # Revisions are immutable: the legacy revision is a second one, stored as a
        # release before pinning wrote it, and made current (as ``corrupt`` does).
        (rev,) = await h.sql("SELECT * FROM schedule_revisions WHERE schedule_id = :i", i=unpinned)
        assert rev["definition"].get("authority_version"), "revision 1 pinned no version"
        await h.sql(
            "INSERT INTO schedule_revisions (schedule_id, revision, definition,"
            " created_by_principal_id, created_at) SELECT schedule_id, 2,"
            " definition - 'authority_version', created_by_principal_id, created_at"
            " FROM schedule_revisions WHERE schedule_id = :i AND revision = 1",
            i=unpinned,
        )
        await h.sql("UPDATE schedules SET current_revision = 2 WHERE id = :i", i=unpinned)
        nominal = await h.next_fire(pinned)
        assert await h.next_fire(unpinned) == nominal
        h.clock.advance_to(nominal + LATE)
        await h.scan()
        ledger = await h.ledger()
        out = []
        for sid in (pinned, unpinned):
            mine = ledger.of(sid)
            (occurrence,) = mine.occurrences
            assert occurrence["disposition"] == "MATERIALIZED", occurrence
            assert occurrence["nominal_fire_at"] == nominal
            assert occurrence["materialized_at"] == nominal + LATE
            assert occurrence["authority_version"], occurrence
            (run,) = mine.runs
            events = sorted(mine.session_events, key=lambda e: e["seq"])
            out.append(Materialized(occurrence, run, events, mine.checkpoints))
        return out
    finally:
        await h.close()


@pytest.mark.rule("rule.materialize.run_linkage")
async def test_seed_checkpoint_and_run_queued_name_what_the_run_is(pg_url: str) -> None:
    problems = []
    for m in await materialize_two(pg_url):
        label = f"occurrence {m.occurrence['id']}"
        at = m.occurrence["materialized_at"]
        by_type = {e["event_type"]: e for e in m.events}
        seed_message = by_type["message.user"]
        if seed_message["context_only"] is not True:
            problems.append(f"{label}: the seed message is not context-only")
        (checkpoint,) = m.checkpoints
        if (checkpoint["seq"], checkpoint["fencing_token"]) != (0, 0):
            problems.append(f"{label}: seed checkpoint {checkpoint}")
        want_state = {
            "kind": "seed",
            "session_id": str(m.run["session_id"]),
            "context_seq": seed_message["seq"],
        }
        if checkpoint["state"] != want_state:
            problems.append(
                f"{label}: seed checkpoint state {checkpoint['state']}, not {want_state}"
            )
        queued = by_type["run.queued"]["payload"]
        want = {
            "authority_version": m.occurrence["authority_version"],
            "priority": 10,
            "scheduled_for": format_instant(at),
            "deadline_at": format_instant(at + timedelta(seconds=TIMEOUT)),
        }
        if {k: queued.get(k) for k in want} != want:
            problems.append(f"{label}: run.queued payload {queued} lacks {want}")
        row = {
            "scheduled_for": format_instant(m.run["scheduled_for"]),
            "deadline_at": format_instant(m.run["deadline_at"]),
        }
        if {k: queued.get(k) for k in row} != row:
            problems.append(f"{label}: run.queued says {queued}, the run row {row}")
    assert problems == [], problems


@pytest.mark.gate("gate.schedule.run_bounded", facet="check")
async def test_run_is_stamped_with_its_timeout_and_deadline(pg_url: str) -> None:
    for m in await materialize_two(pg_url):
        run, at = m.run, m.occurrence["materialized_at"]
        assert run["deadline_at"] == at + timedelta(seconds=TIMEOUT), run["deadline_at"]
        assert run["metadata"].get("run_timeout_seconds") == TIMEOUT, run["metadata"]
        assert run["limits"] == LIMITS.to_json(), run["limits"]


@pytest.mark.rule("rule.queue.eligibility")
async def test_run_is_eligible_from_its_materialization_not_its_nominal_instant(
    pg_url: str,
) -> None:
    for m in await materialize_two(pg_url):
        run, at = m.run, m.occurrence["materialized_at"]
        assert at != m.occurrence["nominal_fire_at"]
        assert run["status"] == "QUEUED"
        assert run["scheduled_for"] == at, (run["scheduled_for"], at)
        assert run["priority"] == 10, run["priority"]
