"""gate.schedule.persistence_schema by behaviour: the run queue's row rules, tried at
their boundaries (as ``test_persistence_behaviour`` tries the schedule tables' and the
run lease's). The catalog inspection sees these CHECK constraints by name only, and
autogenerate does not compare their text, so a widened rule is visible only when tried:

- a run's status is one of the five queue states (QUEUED, RUNNING, COMPLETED, FAILED,
  CANCELLED): each is accepted, any other (a PAUSED run the queue would never claim nor
  admission count) is refused;
- a run's fencing token is never negative (0 accepted, -1 refused): the token only grows
  from 0, and a negative token could fence a holder's write with a forged value;
- a checkpoint's sequence starts at 0, a session event's at 1 (each accepted; one less
  refused).

Each refused form sits beside its legal neighbour, so a refusal is the rule's, not any
statement's. Tests of the test: ``scheduling-gates mutate`` (mutants
``queue.runs_status_check_open``, ``queue.fencing_token_negative``,
``queue.checkpoint_seq_negative``, ``queue.session_event_seq_zero``).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from gates.checks.persistence_support import ALICE, admin_connection, seeded_world
from gates.runner.pytest_plugin import GateEvidence
from scheduling.testing import sqlstate_of

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.persistence_schema"
CHECK_VIOLATION = "23514"

_STATUS = "UPDATE runs SET status = '{status}' WHERE id = :r"
_CHECKPOINT = "UPDATE run_checkpoints SET seq = {seq} WHERE run_id = :r AND seq = 0"
_EVENT = (
    "INSERT INTO session_events (session_id, seq, run_id, event_type, actor, context_only,"
    " payload, occurred_at) SELECT session_id, {seq}, id, 'probe', 'runtime', false,"
    " '{{}}'::jsonb, updated_at FROM runs WHERE id = :r"
)

# (what is tried, the statement, None if the database must accept it (one row), else
# the SQLSTATE it must refuse it with).
BOUNDARIES: tuple[tuple[str, str, str | None], ...] = (
    *(
        (f"status {status}", _STATUS.format(status=status), None)
        for status in ("QUEUED", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
    ),
    *(
        (f"status {status}", _STATUS.format(status=status), CHECK_VIOLATION)
        for status in ("PAUSED", "queued", "")
    ),
    ("fencing token 0", "UPDATE runs SET fencing_token = 0 WHERE id = :r", None),
    ("fencing token -1", "UPDATE runs SET fencing_token = -1 WHERE id = :r", CHECK_VIOLATION),
    # The seeded run's first checkpoint (seq 0) renumbered: to itself, then one less.
    ("checkpoint seq 0", _CHECKPOINT.format(seq="0"), None),
    ("checkpoint seq -1", _CHECKPOINT.format(seq="-1"), CHECK_VIOLATION),
    ("session event seq 1000", _EVENT.format(seq="1000"), None),
    ("session event seq 0", _EVENT.format(seq="0"), CHECK_VIOLATION),
)


@pytest.mark.gate(GATE)
async def test_run_queue_row_rules_hold_at_their_boundaries(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    world = await seeded_world(pg_url)
    run_id = world.of(ALICE).run.id
    seen: list[tuple[str, Any]] = []
    async with admin_connection(pg_url) as conn:
        for label, sql, _ in BOUNDARIES:
            outcome: Any
            try:
                outcome = (await conn.execute(text(sql), {"r": run_id})).rowcount
            except DBAPIError as exc:
                outcome = sqlstate_of(exc)
            finally:
                await conn.rollback()
            seen.append((label, outcome))
            gate_evidence.append("run_queue_boundaries", {"tried": label, "outcome": outcome})
    expected = [(label, 1 if refusal is None else refusal) for label, _, refusal in BOUNDARIES]
    assert seen == expected
