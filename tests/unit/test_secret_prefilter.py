"""The scanner's per-detector character condition (ADR 2600) is sound and is used.

``required_sets`` may only ever spare a regex that could not have matched: every
match of every detector, in every view the scanner builds from the credential, public
and benign corpora, consumes one of its pattern's required characters, and scanning
with the condition gives exactly the findings and counters of scanning without it.
A test of the test shows the property failing on a plausible wrong walk (a repetition
that may match zero times trusted as mandatory), and a spy pattern shows that a window
without the characters really skips the regex.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scheduling.domain.secrets.prefilter as prefilter
import scheduling.domain.secrets.scanner as scanner_module
from gates.checks.corpora import benign_corpus, credential_corpus
from gates.checks.corpora.public_formats import BENIGN, entropy_cases, vendor_cases
from gates.checks.test_no_credentials_public import CORPUS_SEED
from scheduling.domain.secrets import DETECTORS, Detector, ScanReport, SecretScanner
from scheduling.domain.secrets.prefilter import required_sets
from scheduling.domain.secrets.views import View

SEED = 20261130


def _texts() -> list[str]:
    texts = [case.instruction for case in credential_corpus(SEED)]
    texts += list(benign_corpus(SEED))
    texts += [case.instruction for case in vendor_cases(CORPUS_SEED)[0]]
    texts += [case.instruction for case in entropy_cases(CORPUS_SEED)]
    texts += list(BENIGN)
    return texts


TEXTS = _texts()
NEEDS = [required_sets(d.pattern) for d in DETECTORS]


def _views(texts: list[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every view text the scanner matches for ``texts`` (decoded, joined, percent...)."""
    seen: list[str] = []
    original = SecretScanner._match

    def recording(self: SecretScanner, view: View, state: Any) -> None:
        seen.append(view.text)
        original(self, view, state)

    with monkeypatch.context() as patch:
        patch.setattr(SecretScanner, "_match", recording)
        scanner = SecretScanner()
        for text in texts:
            scanner.inspect(text)
    return seen


def _violations(views: list[str], needs: list[tuple[frozenset[str], ...]]) -> list[str]:
    """Matches in ASCII text that consume no character of one of their pattern's
    required sets."""
    bad: list[str] = []
    for detector, sets in zip(DETECTORS, needs, strict=True):
        for text in views:
            for match in detector.pattern.finditer(text):
                consumed = match.group(0)
                missed = [s for s in sets if s.isdisjoint(consumed)]
                if consumed.isascii() and missed:
                    bad.append(f"{detector.kind}: {sorted(missed[0])}")
    return bad


@pytest.fixture(scope="module")
def views() -> list[str]:
    with pytest.MonkeyPatch.context() as patch:
        return _views(TEXTS, patch)


def test_the_corpora_give_matches_of_most_detectors(views: list[str]) -> None:
    # The soundness check below means something only over text the detectors match.
    matched = {d.kind for d in DETECTORS if any(d.pattern.search(v) for v in views)}
    assert len(views) > len(TEXTS)  # decoded and re-joined views are in it
    assert len(matched) >= 40, sorted({d.kind for d in DETECTORS} - matched)


def test_every_match_consumes_one_of_its_required_characters(views: list[str]) -> None:
    assert sum(bool(sets) for sets in NEEDS) >= 55  # nearly every row is filtered
    assert _violations(views, NEEDS) == []


def _report(report: ScanReport) -> tuple[Any, ...]:
    return (
        report.findings,
        report.views,
        report.windows,
        report.chars_searched,
        report.decoded_pieces,
    )


@pytest.fixture
def unfiltered(monkeypatch: pytest.MonkeyPatch) -> Iterator[SecretScanner]:
    """A scanner whose rows carry no condition (every regex runs on every window)."""
    monkeypatch.setattr(scanner_module, "required_sets", lambda pattern: ())
    scanner_module._row.cache_clear()
    try:
        yield SecretScanner()
    finally:
        scanner_module._row.cache_clear()


def _differences(unfiltered: SecretScanner, needs: list[tuple[frozenset[str], ...]]) -> list[str]:
    """Texts whose report with ``needs`` differs from the report without conditions."""
    by_detector = dict(zip(DETECTORS, needs, strict=True))
    filtered = SecretScanner()
    for glued in (False, True):
        rows = unfiltered._plan(glued).rows
        assert all(r.needs == () for r in rows)
        filtered._plans[glued] = scanner_module._Plan(
            tuple(
                scanner_module._Row(r.detector, r.finditer, r.group, by_detector[r.detector])
                for r in rows
            )
        )
    return [
        text[:60]
        for text in TEXTS
        if _report(filtered.inspect(text)) != _report(unfiltered.inspect(text))
    ]


def test_the_filtered_scan_reports_what_the_unfiltered_scan_reports(
    unfiltered: SecretScanner,
) -> None:
    assert _differences(unfiltered, NEEDS) == []


def test_both_checks_fail_on_a_walk_that_trusts_optional_parts(
    views: list[str], unfiltered: SecretScanner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test of the test: a walk that takes ``x{0,n}`` as mandatory (the plausible slip)
    derives conditions some real matches break: the soundness check reports them, and
    the scan with them misses findings the unfiltered scan makes."""
    original = prefilter._item

    def trusting(item: Any, flags: int) -> list[frozenset[str]]:
        op, value = item
        if str(op) in prefilter._REPEATS and value[0] == 0:
            return prefilter._sequence(list(value[2]), flags)
        return original(item, flags)

    monkeypatch.setattr(prefilter, "_item", trusting)
    wrong = [prefilter.required_sets(d.pattern) for d in DETECTORS]
    assert _violations(views, wrong) != []
    assert _differences(unfiltered, wrong) != []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ09 =:_-./+%|@\"'\nsk_ghpxoAKIeyJ"), max_size=400))
def test_arbitrary_ascii_text_breaks_no_condition(text: str) -> None:
    assert _violations([text], NEEDS) == []


class _SpyPattern:
    """A compiled pattern that counts its ``finditer`` calls."""

    def __init__(self, source: str) -> None:
        self._compiled = re.compile(source)
        self.pattern = self._compiled.pattern
        self.flags = self._compiled.flags
        self.groupindex = self._compiled.groupindex
        self.calls = 0

    def finditer(self, text: str, pos: int = 0, endpos: int = 2**31) -> Iterator[re.Match[str]]:
        self.calls += 1
        return self._compiled.finditer(text, pos, endpos)


def test_a_window_without_the_characters_skips_the_regex() -> None:
    spy = _SpyPattern(r"password=(?P<secret>\w{8,})")
    detector = Detector("password_assignment", cast(re.Pattern[str], spy))
    scanner = SecretScanner([detector])
    assert scanner.scan("Summarize the overnight news about the projects I follow.") == []
    assert spy.calls == 0  # no "=" in the text: the regex never ran
    assert scanner.scan("use password=hunter2hunter2 today") != []
    assert spy.calls == 1
    # Non-ASCII text is always searched (its case-insensitive kin are not tested).
    assert scanner.scan("résumé of the news") == []
    assert spy.calls == 2


def test_the_rows_are_built_once_not_per_view_or_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ADR 2600 removed stays removed: the detector list and each detector's value
    group were rebuilt per view and per window x detector (on the old code this counts
    a call per window and detector: 61 per short text)."""
    scanner = SecretScanner()
    scanner.scan("warm")
    calls: list[str] = []
    original: Callable[[Detector], str | int] = Detector.value_group

    def counting(self: Detector) -> str | int:
        calls.append(self.kind)
        return original(self)

    monkeypatch.setattr(Detector, "value_group", counting)
    long_text = "plain words and more words, " * 2000  # several windows
    scanner.scan(long_text)
    scanner.scan("Summarize the overnight news about the projects I follow.")
    assert scanner.inspect(long_text).windows > 1
    assert calls == []
