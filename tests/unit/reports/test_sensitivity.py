"""The report's link to the latest sensitivity run: read from the mutate result file,
never invented; "no sensitivity run" without one."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gates.runner.mutate import MutantResult, result_payload
from gates.runner.sensitivity import LATEST, latest_sensitivity
from reports.sensitivity_text import sensitivity_line


def write_result(root: Path) -> Path:
    started = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
    results = [
        MutantResult("a.one", "KILLED", ["gate.schedule.civil_time"], ["gate.schedule.civil_time"]),
        MutantResult("b.two", "SURVIVED", ["rule.purge.terminal"], []),
    ]
    payload = result_payload(
        results,
        ["gate.schedule.not_early"],
        selection=[],
        started_at=started,
        finished_at=started + timedelta(seconds=90),
        commit="0123456789abcdef",
    )
    path = root / LATEST
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(payload))
    return path


def test_without_a_result_file_the_report_says_so(tmp_path: Path) -> None:
    found = latest_sensitivity(None, tmp_path)
    assert found.run is None
    assert found.sha256 is None
    assert found.path == LATEST.as_posix()
    assert "no sensitivity run" in sensitivity_line(found)


def test_the_latest_result_is_linked_by_path_digest_date_and_counts(tmp_path: Path) -> None:
    path = write_result(tmp_path)
    found = latest_sensitivity(None, tmp_path)
    assert found.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert found.run is not None
    assert (found.run.killed, found.run.total) == (1, 2)
    assert found.run.not_killed == ["b.two"]
    assert found.run.commit == "0123456789abcdef"
    assert found.run.finished_at is not None
    line = sensitivity_line(found)
    assert "1 of 2 mutants killed" in line
    assert "not killed: b.two" in line
    assert found.sha256[:12] in line


def test_an_unreadable_result_is_not_taken_for_a_run(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.json"
    path.write_text('{"mutants": "not a list"}')
    found = latest_sensitivity(path, tmp_path)
    assert found.run is None
    assert found.note is not None
    assert found.note.startswith("unreadable mutate result")
    assert "unreadable" in sensitivity_line(found)
