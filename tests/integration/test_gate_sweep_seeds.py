"""Short form of the seed sweep (``scheduling-gates sweep``): the gates whose coverage
guards once depended on the seed give the same status for the seeds that used to split
them (issue 10). The full sweep (whole quick profile, 20+ seeds) is documented in the
README; this one is restricted with ``--gate`` so it stays well under a minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.runner import cli

pytestmark = pytest.mark.postgres

LUCK_SENSITIVE = ("gate.schedule.civil_time", "gate.schedule.calendar_recurrence")


def test_luck_sensitive_gates_do_not_depend_on_the_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sweep", "--seeds", "3", "--seed-list", "1,20261130,455213441"]
    argv += [a for gate in LUCK_SENSITIVE for a in ("--gate", gate)]
    code = cli.main([*argv, "--output", str(tmp_path)])
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert saved["seeds"] == [1, 20261130, 455213441]
    assert saved["differing_gates"] == [], out
    assert code == 0, out
    # Not merely the same: the same PASS, each seed with its own report.
    for seed in saved["seeds"]:
        assert saved["statuses"][str(seed)] == dict.fromkeys(sorted(LUCK_SENSITIVE), "PASS")
        report = json.loads((tmp_path / f"seed-{seed}" / "gate-report.json").read_text())
        assert report["run"]["seed"] == seed
