"""Test of the test of ``rule.wakeup.at_commit``: both planted wake-up bugs (no
notification at all; one sent on its own connection before the COMMIT, so also for a
create that never commits) turn exactly that rule red on a temporary copy, and the
working tree is untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gates.runner.inventory import default_checks_dir, project_root
from gates.runner.mutate import load_mutants, run_all

pytestmark = pytest.mark.postgres

ROOT = project_root(default_checks_dir())
IDS = ("wakeups.at_commit_dropped", "wakeups.sent_before_commit")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_both_wakeup_mutants_are_killed_by_the_rule() -> None:
    chosen = [m for m in load_mutants() if m.id in IDS]
    assert [m.id for m in chosen] == list(IDS)
    before = {m.file: digest(ROOT / m.file) for m in chosen}
    results = run_all(chosen, ROOT)
    assert [(r.id, r.verdict, r.red) for r in results] == [
        (mid, "KILLED", ["rule.wakeup.at_commit"]) for mid in IDS
    ]
    assert {m.file: digest(ROOT / m.file) for m in chosen} == before
