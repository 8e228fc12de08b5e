"""rule.lifecycle.one_time_completes on PostgreSQL: a one-time schedule's sole
occurrence, once decided, completes it.

Four cases, each on its own database: the instant materialized (a run; also decided at
the very instant, where the next firing strictly after now is none), recorded
MISSED beyond its grace window (no run), and decided AUTHORIZATION_FAILED (the owner
disabled; no run). In each the schedule is COMPLETED in the decision's transaction:
no next firing, no pause reason, failures counted as for any decision, one
``schedule.completed`` event beside the occurrence's; later scans, however late, write
nothing more. A worker that leaves the schedule ACTIVE with no next firing, or
completes it only when a run was created, is caught.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import format_instant
from scheduling.domain.errors import ConflictError
from scheduling.service.materializer import GRACE_EXPIRED, PRINCIPAL_DISABLED
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import START, definition

pytestmark = pytest.mark.postgres

RULE = "rule.lifecycle.one_time_completes"
AT = START + timedelta(hours=2)
GRACE = timedelta(seconds=definition().misfire_grace_seconds)


async def nothing(_: MaterializeWorld) -> None:
    return None


async def disable(h: MaterializeWorld) -> None:
    await h.set_principal(enabled=False)


@dataclass(frozen=True)
class Case:
    late_by: timedelta
    before: Callable[[MaterializeWorld], Awaitable[None]]
    disposition: str
    reason_code: str | None
    failures: int


CASES = {
    "materialized": Case(timedelta(seconds=3), nothing, "MATERIALIZED", None, 0),
    # Decided at its very instant: the next firing strictly after now is none.
    "materialized_at_the_instant": Case(timedelta(0), nothing, "MATERIALIZED", None, 0),
    "missed_beyond_grace": Case(GRACE + timedelta(seconds=60), nothing, "MISSED", GRACE_EXPIRED, 1),
    "authorization_failed": Case(
        timedelta(seconds=3), disable, "AUTHORIZATION_FAILED", PRINCIPAL_DISABLED, 1
    ),
}


@pytest.mark.rule(RULE)
@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_sole_decision_completes_a_one_time_schedule(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    spec = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(cadence={"kind": "ONCE", "at": format_instant(AT)})
        assert await h.next_fire(sid) == AT
        await spec.before(h)
        h.clock.advance_to(AT + spec.late_by)
        await h.scan()
        ledger = (await h.ledger()).of(sid)
        assert [o["disposition"] for o in ledger.occurrences] == [spec.disposition]
        decided = ledger.occurrences[0]
        assert decided["nominal_fire_at"] == AT
        assert decided["reason_code"] == spec.reason_code
        assert len(ledger.runs) == (1 if spec.disposition == "MATERIALIZED" else 0)
        schedule = await h.schedule(sid)
        assert schedule["state"] == "COMPLETED", schedule
        assert schedule["next_fire_at"] is None
        assert schedule["pause_reason"] is None
        assert schedule["consecutive_failures"] == spec.failures
        completed = [e for e in ledger.events if e["event_type"] == "schedule.completed"]
        assert len(completed) == 1
        # However late the next scans come, the decided instant stays the only one.
        for later in (timedelta(days=1), timedelta(days=400)):
            h.clock.advance_to(AT + later)
            await h.scan()
        after = (await h.ledger()).of(sid)
        assert after.occurrences == ledger.occurrences
        assert len(after.runs) == len(ledger.runs)
        assert (await h.schedule(sid))["state"] == "COMPLETED"
        gate_evidence.record(
            case,
            {
                "disposition": spec.disposition,
                "state_after": "COMPLETED",
                "completed_events": len(completed),
                "later_scans": ["+1 day", "+400 days"],
            },
        )
    finally:
        await h.close()


ILLEGAL = "schedule.lifecycle.illegal_transition"
PARIS = {"local_time": "09:00", "timezone": "Europe/Paris"}
# Every command the service offers, as a COMPLETED schedule at revision 1 receives it.
COMMANDS: dict[str, Callable[[MaterializeWorld, UUID], Awaitable[object]]] = {
    "pause": lambda h, sid: h.world.service.pause(WHO, sid, 1),
    "resume": lambda h, sid: h.world.service.resume(WHO, sid, 1),
    "cancel": lambda h, sid: h.world.service.cancel(WHO, sid, 1),
    "update": lambda h, sid: h.world.service.update(
        WHO, sid, 1, definition(cadence={"kind": "DAILY", **PARIS})
    ),
}


@pytest.mark.rule(RULE)
async def test_a_completed_schedule_takes_no_further_transition(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    """COMPLETED -> (none): pause, resume, cancel and a full update of a completed
    one-time schedule, each with its current revision, are conflicts naming that
    revision, and none changes the row, writes a revision or an event, or makes it
    due again (a table that lets COMPLETED pause, reopen or take revision 2 is caught)."""
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(cadence={"kind": "ONCE", "at": format_instant(AT)})
        h.clock.advance_to(AT + timedelta(seconds=3))
        await h.scan()
        before = await h.schedule(sid)
        assert before["state"] == "COMPLETED"
        ledger = (await h.ledger()).of(sid)
        refused = {}
        for name, command in COMMANDS.items():
            h.clock.advance(60)
            with pytest.raises(ConflictError) as caught:
                await command(h, sid)
            assert caught.value.code == ILLEGAL, name
            assert caught.value.details.get("current_revision") == 1, name
            refused[name] = caught.value.code
        assert await h.schedule(sid) == before
        after = (await h.ledger()).of(sid)
        assert after.events == ledger.events
        revisions = await h.sql(
            "SELECT revision FROM schedule_revisions WHERE schedule_id = :i", i=sid
        )
        assert [r["revision"] for r in revisions] == [1]
        h.clock.advance_to(AT + timedelta(days=2))
        await h.scan()
        assert (await h.ledger()).of(sid).occurrences == ledger.occurrences
        gate_evidence.record("completed_refuses", refused)
    finally:
        await h.close()
