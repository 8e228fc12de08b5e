"""gate.schedule.materialize_atomic, facet ``failover``: the primary dies under load
and its synchronous standby is promoted.

On a replica pair of the check's own (``simulation.provider._replica``: a durable
primary and a synchronous streaming standby from the local binaries on loopback),
two schedule workers built through the composition root share the due load over the
pair's multi-host URL (``target_session_attrs=read-write``). In the middle of the
sixth materialization (its occurrence inserted, not committed) the primary's
postmaster is SIGKILLed and the standby promoted (``simulation.worlds.failover``).
The same worker objects keep making passes. On the promoted server: every occurrence
a worker reported committed is present (none lost), one per schedule and instant
(none duplicated), each MATERIALIZED one with its session, run, checkpoint, session
event and process event (none partial), every seeded schedule decided, and each
worker made a clean pass after the failover (they continued without a restart). A
kill that never happened, or no committed work on either side of it, makes the gate
ERROR (``not_covered``).

Kept cheap for CI: 16 schedules, one failover, a few seconds. The tests of the test
(an asynchronous standby with a forced replication delay loses the commits made
before the kill; the ledger check finds a torn occurrence and an undecided schedule)
are in tests/integration/test_failover.py.
"""

from __future__ import annotations

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.provider._replica import STANDBY_NAME, replica_pair
from simulation.worlds.failover import failover_under_load

pytestmark = pytest.mark.postgres

SCHEDULES = 16
KILL_AFTER = 5
WORKERS = 2


@pytest.mark.gate("gate.schedule.materialize_atomic", facet="failover")
async def test_failover_to_a_synchronous_standby_loses_duplicates_and_tears_nothing(
    gate_evidence: GateEvidence,
) -> None:
    with replica_pair(synchronous=True) as pair:
        streaming = pair.replication_state()
        outcome = await failover_under_load(
            pair, schedules=SCHEDULES, kill_after=KILL_AFTER, workers=WORKERS
        )
    gate_evidence.record("replication", [list(s) for s in streaming])
    gate_evidence.record("schedules", SCHEDULES)
    gate_evidence.record("workers", WORKERS)
    gate_evidence.record("committed_before_kill", outcome.committed_before_kill)
    gate_evidence.record("decided_after_kill", outcome.decided_after_kill)
    gate_evidence.record("occurrences_reported", len(outcome.reported))
    gate_evidence.record("transient_retries", outcome.transient_retries)
    gate_evidence.record("workers_continued", outcome.workers_continued)
    gate_evidence.record("kill", "SIGKILL of the primary's postmaster mid-transaction")
    assert streaming == [(STANDBY_NAME, "sync")]
    if not outcome.killed or not outcome.committed_before_kill or not outcome.decided_after_kill:
        gate_evidence.not_covered(
            f"the failover did not split committed work: killed={outcome.killed},"
            f" before={outcome.committed_before_kill}, after={outcome.decided_after_kill}"
        )
    assert outcome.transient_retries > 0, "the in-flight work must have been retried"
    assert outcome.problems == []
    assert outcome.workers_continued == WORKERS
