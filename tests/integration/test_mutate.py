"""``scheduling-gates mutate`` on a fast pair of shipped mutants: each is applied to a
temporary copy (the working tree is untouched) and turns its rule red; a stale
snippet is reported STALE, not skipped; the shipped set parses and names only known
gates, rules and files."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from catalog import load_catalog
from catalog.rules import load_rules
from gates.runner.inventory import default_checks_dir, project_root
from gates.runner.mutate import coverage, load_mutants, run_all

pytestmark = pytest.mark.postgres

ROOT = project_root(default_checks_dir())
MUTANTS = {m.id: m for m in load_mutants()}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_shipped_mutants_name_known_targets_and_files() -> None:
    known = {*load_catalog().ids, *load_rules()}
    for mutant in MUTANTS.values():
        assert set(mutant.kills) <= known, mutant.id
        assert (ROOT / mutant.file).read_text().count(mutant.snippet) == 1, mutant.id
        assert all((ROOT / c).is_file() for c in mutant.checks), mutant.id
    assert set(load_rules()) <= {k for m in MUTANTS.values() for k in m.kills}


def test_every_gate_and_rule_is_targeted_by_a_shipped_mutant() -> None:
    # Declared here; observed (each one turned red) by the mutate lane, `.ci/mutate`.
    assert coverage(list(MUTANTS.values()), [*load_catalog().ids, *load_rules()]) == []


def test_two_mutants_are_killed_on_a_copy() -> None:
    chosen = [MUTANTS["purge.ignores_retention"], MUTANTS["repair.silent"]]
    before = {m.file: digest(ROOT / m.file) for m in chosen}
    stale = replace(chosen[0], id="stale", snippet="this text is not in the file")
    results = run_all([*chosen, stale], ROOT)
    assert [(r.id, r.verdict) for r in results] == [
        ("purge.ignores_retention", "KILLED"),
        ("repair.silent", "KILLED"),
        ("stale", "STALE"),
    ]
    assert results[0].red == ["rule.purge.terminal"]
    assert {m.file: digest(ROOT / m.file) for m in chosen} == before


def test_a_mutant_whose_checks_never_finish_is_a_timeout_not_a_hang() -> None:
    # A mutant that makes a wait never end (a deadline never reached) would hold the
    # lane forever; the limit ends its checks. Here the limit is below any startup.
    spin = replace(MUTANTS["repair.silent"], id="spin")
    (result,) = run_all([spin], ROOT, timeout_s=0.01)
    assert (result.id, result.verdict) == ("spin", "TIMEOUT")
    assert result.red == []
    assert "0.01 s" in result.detail
