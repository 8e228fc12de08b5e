"""The fail-closed cycle both firing revalidation checks run (``gate.schedule.authority_fresh``
for authority, ``rule.materialize.configuration_fresh`` for configuration).

One long-lived worker first materializes an occurrence under the original world (so a
worker that caches what it read is caught), the case breaks it, the next due occurrence
must fail closed, the case restores it, and only the occurrence after that
materializes again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

from simulation.worlds.materialize import LedgerSnapshot, MaterializeWorld, StrictScheduleWorker

Step = Callable[[], Awaitable[None]]


async def fails_closed_then_recovers(
    h: MaterializeWorld,
    worker: StrictScheduleWorker,
    sid: UUID,
    *,
    disposition: str,
    code: str,
    breaks: Step,
    restores: Step,
) -> tuple[dict[str, Any], LedgerSnapshot]:
    """The cycle above; returns the failed occurrence row and the final ledger of
    ``sid``. The failed occurrence: ``disposition`` with reason ``code``, no session or
    run, one audited ``schedule.occurrence.<disposition>`` event with that reason, the
    schedule still ACTIVE with one failure counted and its cadence advanced; after the
    restore the next occurrence materializes and the failed one is never rewritten."""
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=3))
    assert (await worker.run_once()).errors == {}
    warm = (await h.ledger()).of(sid)
    assert [o["disposition"] for o in warm.occurrences] == ["MATERIALIZED"]
    await h.sql("UPDATE runs SET status = 'COMPLETED', finished_at = :t", t=h.clock.now())
    first = await h.next_fire(sid)
    await breaks()
    h.clock.advance_to(first + timedelta(seconds=3))
    assert (await worker.run_once()).errors == {}
    ledger = (await h.ledger()).of(sid)
    assert len(ledger.occurrences) == 2
    failed = ledger.occurrences[1]
    assert failed["disposition"] == disposition, failed
    assert failed["reason_code"] == code
    assert failed["session_id"] is None
    assert failed["run_id"] is None
    assert len(ledger.runs) == len(ledger.sessions) == 1
    audit = [e for e in ledger.events if e["event_type"].endswith(disposition.lower())]
    assert len(audit) == 1
    assert audit[0]["payload"]["reason_code"] == code
    schedule = await h.schedule(sid)
    assert schedule["state"] == "ACTIVE"
    assert schedule["consecutive_failures"] == 1
    second = schedule["next_fire_at"]
    assert second > h.clock.now()
    await restores()
    h.clock.advance_to(second + timedelta(seconds=3))
    assert (await worker.run_once()).errors == {}
    after = (await h.ledger()).of(sid)
    assert [o["disposition"] for o in after.occurrences] == [
        "MATERIALIZED",
        disposition,
        "MATERIALIZED",
    ]
    assert after.occurrences[1] == failed
    assert len(after.runs) == 2
    return failed, after
