"""`scheduling-gates run` keeps pytest's progress out of stdout: a script reads the verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.postgres
def test_piped_stdout_carries_only_the_verdict(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("scheduling-gates")
    proc = subprocess.run(
        [str(script), "run", "--gate", "gate.schedule.calendar_values", "--output", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    lines = [line for line in proc.stdout.splitlines() if line]
    assert lines[0].startswith("Verified gate ceiling: "), proc.stdout
    assert lines[-1].startswith("seed ")
    assert len(lines) == 3
    assert "passed" in proc.stderr  # pytest's own summary went to stderr
    assert (tmp_path / "gate-report.json").exists()
