"""Bounded work: the scanner's regexes cannot backtrack without bound, every match fits
in a window overlap, and pathological megabyte inputs cost work linear in their size
(asserted by counting the characters handed to the regex engine, not by wall time)."""

from __future__ import annotations

import base64
import itertools
import re
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

from scheduling.domain.secrets import (
    DETECTORS,
    MAX_MATCH_CHARS,
    OVERLAP_CHARS,
    WINDOW_CHARS,
    SecretScanner,
)
from scheduling.domain.secrets.scanner import windows

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT}
_POSSESSIVE = getattr(sre_constants, "POSSESSIVE_REPEAT", None)
if _POSSESSIVE is not None:
    _REPEATS.add(_POSSESSIVE)


def _children(op: Any, av: Any) -> list[Any]:
    """Sub-patterns nested inside one parsed node."""
    if op in _REPEATS:
        return [av[2]]
    if op == sre_constants.SUBPATTERN:
        return [av[3]]
    if op == sre_constants.BRANCH:
        return list(av[1])
    if op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
        return [av[1]]
    if op == sre_constants.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []


def _audit(pattern: Any, inside_repeat: bool, problems: list[str]) -> None:
    """Flag unbounded repeats, and variable repeats inside a repeat that can iterate.

    An optional group (``{0,1}``) around a bounded repeat is entered at most once, so
    it only multiplies a bounded amount of backtracking; ``(a{1,3}){1,5}`` is not allowed.
    """
    for op, av in pattern:
        if op in _REPEATS:
            low, high, _ = av
            if high == sre_constants.MAXREPEAT:
                problems.append(f"unbounded repeat {{{low},}}")
            if inside_repeat and low != high:
                problems.append("variable repeat nested in an iterating repeat")
            _audit(av[2], inside_repeat or high > 1, problems)
            continue
        for child in _children(op, av):
            _audit(child, inside_repeat, problems)


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: f"{d.kind}:{d.pattern.pattern[:24]}")
def test_every_pattern_is_bounded_and_unnested(detector: Any) -> None:
    parsed = sre_parse.parse(detector.pattern.pattern, detector.pattern.flags)
    problems: list[str] = []
    _audit(parsed, False, problems)
    assert problems == []
    assert parsed.getwidth()[1] <= MAX_MATCH_CHARS


def test_the_audit_allows_optional_groups_around_bounded_repeats() -> None:
    problems: list[str] = []
    _audit(sre_parse.parse(r"x(?:[_.-][a-z]{0,24})?=(?: ?BLOCK)?"), False, problems)
    assert problems == []


def test_the_audit_catches_what_it_forbids() -> None:
    for bad in (r"(a+)+b", r"x[a-z]*y", r"(?:ab{1,3}){1,5}", r"(?:(?:a|b){0,2}c){2}"):
        problems: list[str] = []
        _audit(sre_parse.parse(bad), False, problems)
        assert problems, bad


def test_windows_cover_the_text_and_overlap_by_at_least_the_longest_match() -> None:
    assert OVERLAP_CHARS >= MAX_MATCH_CHARS
    for text in ("", "a" * 10, "a" * 100_000, ("word " * 20_000), "b" * (WINDOW_CHARS + 1)):
        spans = list(windows(text))
        assert spans[0][0] == 0
        assert spans[-1][1] == len(text)
        for (s1, e1), (s2, e2) in itertools.pairwise(spans):
            assert s2 == e1 - OVERLAP_CHARS  # overlap is exactly the bound
            assert s1 < s2 < e1 < e2
            assert e1 - s1 <= WINDOW_CHARS


MB = 1_000_000
N = 200_000  # the other shapes: big enough to show linearity, small enough for CI
PATHOLOGICAL = {
    "a_1mb": "a" * MB,
    "base64_alphabet_1mb": "ab+/" * (MB // 4),
    "upper": "A" * N,
    "printable_base64": "YWFh" * (N // 4),  # decodes to 'aaa...': child views are scanned
    "percent": "%41" * (N // 3),
    "double_percent": "%2541" * (N // 5),
    "zero_width": "\u200b" * N,
    "nbsp_split": "a\u00a0" * (N // 2),
    "lines": "a\n" * (N // 2),
    "keywords": "password=" * (N // 9),
    "jwt_prefix": "eyJ" * (N // 3),
    "url_userinfo": "https://a:" * (N // 10),
    "bearer": "bearer " * (N // 7),
    "nfkc_expansion": "\ufdfa" * (N // 100),  # one character NFKC-expands to 18
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_work_is_linear_in_the_input(name: str) -> None:
    scanner = SecretScanner()
    text = PATHOLOGICAL[name]
    half = scanner.inspect(text[: len(text) // 2])
    full = scanner.inspect(text)
    # Every view is at most a constant multiple of the input (18 for NFKC), views per
    # input are bounded (4 roots x 3 percent rounds, plus decoded pieces of at most
    # 4/3 of a run each), and windows overlap by 1/8: the constant is generous.
    bound = len(DETECTORS) * 40 * len(text)
    assert full.chars_searched <= bound
    assert full.decoded_pieces <= 2 * len(text) // 3072 + 2
    # Doubling the input at most doubles the work (plus one window of slack).
    slack = len(DETECTORS) * WINDOW_CHARS * 4
    assert full.chars_searched <= 2 * half.chars_searched + slack
    assert full.input_chars == len(text)


def test_long_base64_runs_are_decoded_in_bounded_pieces() -> None:
    payload = base64.b64encode(b"lorem ipsum dolor sit amet " * 6_000).decode()
    report = SecretScanner().inspect(payload)
    assert report.findings == ()
    assert 0 < report.decoded_pieces <= 2 * len(payload) // 3072 + 2


def test_a_credential_deep_inside_a_long_base64_run_is_found() -> None:
    import random

    rng = random.Random(3)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    token = "gh" + "p_" + "".join(rng.choice(alphabet) for _ in range(35)) + "1"
    blob = ("filler text " * 2_000) + f" token {token} " + ("more text " * 2_000)
    encoded = base64.b64encode(blob.encode()).decode()
    kinds = {f.kind for f in SecretScanner().scan(f"config: {encoded}")}
    assert "github_token" in kinds


def test_compiled_patterns_use_no_flags_beyond_ignorecase() -> None:
    # VERBOSE/DOTALL would change the audited meaning of the pattern source.
    for detector in DETECTORS:
        assert detector.pattern.flags & ~(re.IGNORECASE | re.UNICODE) == 0
