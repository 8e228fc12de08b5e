"""Short HA soaks (issue 25 items 4-5; ADR 2230): the soak on a pg_auto_failover
formation with a switchover, a failover and a lost primary node, each through the
manager; and the soak behind pgbouncer in session mode with server crashes. The same
ledger check and the commit witness must find nothing lost, duplicated, early or
partial. Slow lane (``.ci/ha-soak`` installs the packages); each skips, saying so,
where its package is not installed. The long forms are in docs/operations/ha.md."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simulation.provider._autofailover import find_pg_autoctl
from simulation.provider._pgbouncer import find_pgbouncer
from simulation.scenarios.soak import main

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _soak(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["--processes", "2", "--schedules", "24", "--seed", "7", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.skipif(
    find_pg_autoctl() is None,
    reason="pg_autoctl is not installed (apt-get install postgresql-15-auto-failover;"
    " .ci/ha-soak does)",
)
def test_soak_through_pg_auto_failover_switchover_failover_and_lost_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = _soak(capsys, "--seconds", "32", "--autofailover", "--terminate-every", "4")
    assert report["problem_count"] == 0, report["problems"]
    for kind in ("switchover", "manager_failover", "node_crash"):
        fault = report["faults_by_kind"][kind]
        assert fault == {"injected": 1, "landed_in_transaction": 1}, report["faults_by_kind"]
    assert report["fault_coverage"] == "covered"
    assert report["commit_witness"]["occurrences_seen"] > 0
    assert report["occurrences"] > 0
    assert report["process_exit_codes"] == [0, 0]
    assert code == 0


@pytest.mark.skipif(
    find_pgbouncer() is None,
    reason="pgbouncer is not installed (apt-get install pgbouncer; .ci/ha-soak does)",
)
def test_soak_behind_pgbouncer_session_pooling_with_server_crashes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, report = _soak(
        capsys, "--seconds", "12", "--pgbouncer", "session", "--server-crash-every", "5",
        "--terminate-every", "1",
    )  # fmt: skip
    assert report["problem_count"] == 0, report["problems"]
    assert report["faults_by_kind"]["server_crash"]["injected"] == 2
    assert report["fault_coverage"] == "covered", report["faults_by_kind"]
    assert report["commit_witness"]["occurrences_seen"] > 0
    assert "pgbouncer" in report["error_lines"]
    assert report["process_exit_codes"] == [0, 0]
    assert code == 0
