"""The soak's commit witness and its ERROR-line count can fail (ADR 2230): an id the
witness saw that is gone from the final database is a problem; log lines are counted
by category with their ids and numbers folded."""

from __future__ import annotations

import asyncio
from uuid import UUID

import pytest

from simulation.scenarios.soak import CommitWitness, error_lines


@pytest.mark.postgres
async def test_the_witness_reads_and_reports_a_vanished_commit(pg_url: str) -> None:
    witness = CommitWitness(pg_url)
    stop = asyncio.Event()
    task = asyncio.create_task(witness.run(stop))
    await asyncio.sleep(0.6)
    stop.set()
    await task
    assert witness.reads >= 2
    assert witness.failed_reads == 0
    assert await witness.lost(pg_url) == []
    gone = UUID(int=42)
    witness.occurrences.add(gone)
    witness.runs.add(gone)
    assert await witness.lost(pg_url) == [
        f"witnessed occurrence {gone} is gone",
        f"witnessed run {gone} is gone",
    ]


def test_error_lines_fold_ids_and_numbers_by_source() -> None:
    processes = {
        "soak-0": "ERROR scheduling.x: run 12 failed\nERROR scheduling.x: run 13 failed\n"
        "WARNING scheduling.y: retry 1 in 0.5s\nINFO scheduling.z: fine\nTraceback ...\n",
    }
    servers = {
        "postgres": "2026-12-02 08:00:00 UTC [41] ERROR:  duplicate key value\n"
        "2026-12-02 08:00:01 UTC [42] FATAL:  terminating connection\n",
        "pgbouncer": "2026-12-02 08:00:00 UTC [7] WARNING C-0x55: pooler error: x\n",
    }
    counted = error_lines(processes, servers)
    assert counted["processes"] == {"ERROR scheduling.x: run N failed": 2}
    assert counted["process_warnings"] == {"WARNING scheduling.y: retry N in N.Ns": 1}
    assert counted["postgres"] == {"ERROR duplicate key value": 1}
    assert counted["pgbouncer"] == {"WARNING C-N: pooler error: x": 1}
