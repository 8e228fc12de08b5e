"""A short soak in CI: two worker processes for a few seconds, then the ledger check."""

from __future__ import annotations

import json

import pytest

from simulation.scenarios.soak import main

pytestmark = pytest.mark.postgres


def test_short_soak_passes_its_ledger_check(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["--url", pg_url, "--processes", "2", "--schedules", "24", "--seconds", "6", "--seed", "3"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report["problems"]
    assert report["problem_count"] == 0
    assert report["process_exit_codes"] == [0, 0]
    assert report["occurrences"] > 0
