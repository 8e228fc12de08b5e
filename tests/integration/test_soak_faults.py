"""A short fault soak in CI: worker processes SIGKILLed and restarted, backends
terminated, then the unchanged ledger check; the report lists the faults that landed
inside an open transaction (issue 13 item 7). The long form is documented in
docs/operations/soak.md."""

from __future__ import annotations

import json

import pytest

from simulation.scenarios.soak import main

pytestmark = pytest.mark.postgres


def test_short_fault_soak_passes_and_its_faults_land(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "--url", pg_url, "--processes", "2", "--schedules", "30", "--seconds", "9",
            "--seed", "5", "--kill-every", "3", "--terminate-every", "0.5",
        ]
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["problem_count"] == 0, report["problems"]
    assert report["faults_by_kind"]["sigkill"]["injected"] >= 1
    assert report["faults_by_kind"]["terminate_backend"]["injected"] >= 1
    assert report["fault_coverage"] == "covered", report["faults_by_kind"]
    assert code == 0
    assert report["occurrences"] > 0
    assert all(code == 0 for code in report["process_exit_codes"])
