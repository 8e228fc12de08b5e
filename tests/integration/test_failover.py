"""Tests of the test of the failover facet of materialize_atomic
(src/gates/checks/test_materialize_failover.py): an asynchronous standby with a forced
replication delay loses committed occurrences, and the ledger check finds a torn
occurrence and an undecided schedule; plus the replica pair's own mechanics."""

from __future__ import annotations

import asyncpg
import pytest

from simulation.provider._cluster import _processes_in
from simulation.provider._replica import STANDBY_NAME, replica_pair
from simulation.worlds.failover import FailoverOutcome, failover_under_load, ledger_problems

pytestmark = pytest.mark.postgres


async def _tampered_problems(outcome: FailoverOutcome) -> list[str]:
    """Tear one occurrence (drop its checkpoints) and undecide one schedule on the
    promoted server, then run the same ledger check."""
    conn = await asyncpg.connect(outcome.promoted_url)
    try:
        torn = await conn.fetchval(
            "SELECT run_id FROM schedule_occurrences WHERE disposition = 'MATERIALIZED' LIMIT 1"
        )
        await conn.execute("DELETE FROM run_checkpoints WHERE run_id = $1", torn)
        undecided = outcome.seeded[-1]
        # Foreign keys are triggers: replica mode lets the occurrence go alone.
        await conn.execute("SET session_replication_role = replica")
        await conn.execute("DELETE FROM schedule_occurrences WHERE schedule_id = $1", undecided)
    finally:
        await conn.close()
    return await ledger_problems(outcome.promoted_url, outcome.reported, outcome.seeded)


async def test_failover_to_a_lagging_asynchronous_standby_is_caught_losing_commits() -> None:
    with replica_pair(synchronous=False) as pair:
        outcome = await failover_under_load(pair, stop_streaming=True)
        tampered = await _tampered_problems(outcome)
    assert outcome.killed
    lost = [p for p in outcome.problems if "(lost)" in p]
    # Every commit seen before the kill is lost; so may be a concurrent COMMIT the old
    # primary made just before it, whose response its client read only afterwards.
    before, in_doubt = outcome.committed_before_kill, outcome.in_doubt_at_kill
    assert before > 0
    assert before <= len(lost) <= before + in_doubt, (before, in_doubt, outcome.problems)
    # The ledger check itself can fail on the promoted server: a torn occurrence and
    # an undecided schedule.
    assert any("is partial: no checkpoint" in p for p in tampered), tampered
    assert any("never decided" in p for p in tampered), tampered


@pytest.mark.parametrize(("synchronous", "state"), [(True, "sync"), (False, "async")])
def test_replica_pair_streams_in_the_asked_mode_and_leaves_nothing_behind(
    synchronous: bool, state: str
) -> None:
    with replica_pair(synchronous=synchronous) as pair:
        assert pair.replication_state() == [(STANDBY_NAME, state)]
        clusters = (pair.primary_cluster, pair.standby_cluster)
        assert all(_processes_in(c.data) for c in clusters)
        pair.kill_primary()
        assert _processes_in(pair.primary_cluster.data) == []
        pair.promote()
    for cluster in clusters:
        assert _processes_in(cluster.data) == []
        assert not cluster.root.exists()
