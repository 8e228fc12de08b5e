"""Tests of the test for the public-format corpus of gate.schedule.no_credentials: the
corpus is built without the product's scanner, its draws satisfy the public rules they
come from, and the scanner this issue started from (no entropy fallback rows) lets
most of it through while the benign set stays clean."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import gates.checks.corpora.public_formats as public_formats
import gates.checks.corpora.regex_sampler as regex_sampler
from gates.checks.corpora.public_formats import BENIGN, entropy_cases, load_rules, vendor_cases
from gates.checks.corpora.regex_sampler import to_python
from gates.checks.test_no_credentials_public import CORPUS_SEED
from scheduling.domain.secrets import DETECTORS, SecretScanner
from scheduling.domain.secrets.detectors import FALLBACK_KINDS, VENDOR_KIND

VENDOR, SKIPPED = vendor_cases(CORPUS_SEED)
ENTROPY = entropy_cases(CORPUS_SEED)


def _imports(module: object) -> set[str]:
    tree = ast.parse(Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8"))
    return {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }


def test_the_corpus_never_reads_the_scanner() -> None:
    for module in (public_formats, regex_sampler):
        assert not any(name.startswith("scheduling") for name in _imports(module)), module


def test_every_case_matches_the_public_rule_it_was_drawn_from() -> None:
    print(f"corpus seed {CORPUS_SEED}")
    _, rules = load_rules()
    by_id = {f"{r.source}:{r.rule_id}": r for r in rules}
    for case in VENDOR:
        rule = by_id[case.case_id.rsplit(":", 1)[0]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            assert re.search(to_python(rule.regex), case.embedded), case.case_id
        assert case.secret in case.instruction
    assert len(rules) >= 250
    assert len(VENDOR) >= 480


def test_the_scanner_without_its_entropy_rows_fails_the_corpus() -> None:
    # What no_credentials ran on before: vendor shapes and keyword rows only.
    # (The vendor-shape table, ADR 2131, came later still.)
    before = SecretScanner(
        d for d in DETECTORS if d.kind not in FALLBACK_KINDS and d.kind != VENDOR_KIND
    )
    missed = [c for c in VENDOR + ENTROPY if not before.scan(c.instruction)]
    assert len(missed) > len(VENDOR) // 2
    now = SecretScanner()
    assert [c.case_id for c in VENDOR + ENTROPY if not now.scan(c.instruction)] == []
    assert [b for b in BENIGN if now.scan(b)] == []
