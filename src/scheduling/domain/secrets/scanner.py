"""The secret scanner: credential-shaped text in, kinds and spans out (never values).

Work is bounded and linear in the input. Every view is matched in windows of
``WINDOW_CHARS`` characters that overlap by ``OVERLAP_CHARS`` (at least the longest
possible regex match), so the whole input is scanned however long it is: nothing
beyond a cap is skipped. Decoding nests at most ``MAX_DECODE_DEPTH`` levels of base64
and ``PERCENT_ROUNDS`` rounds of percent-decoding per level.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from scheduling.domain.secrets.detectors import (
    FALLBACK_KINDS,
    MAX_MATCH_CHARS,
    OPAQUE_KIND,
    VENDOR_KIND,
    Detector,
    compiled_detectors,
)
from scheduling.domain.secrets.predicates import prose_words
from scheduling.domain.secrets.prefilter import required_sets
from scheduling.domain.secrets.views import (
    View,
    base64_pieces,
    has_odd_space,
    join_lines,
    normalize,
    odd_space_pieces,
    percent_decode,
)

WINDOW_CHARS = 16384
"""Characters handed to one regex search (``pos``/``endpos``, no copies)."""
OVERLAP_CHARS = MAX_MATCH_CHARS
"""Consecutive windows overlap by this much, so every match is whole in some window."""
MAX_DECODE_DEPTH = 2
"""Base64 inside base64 is decoded once more; deeper nesting is not unwrapped."""
PERCENT_ROUNDS = 2
"""``%2541`` (double percent-encoding) decodes to ``A`` in two rounds."""
EXTEND_MAX_CHARS = 8192
"""A reported token span is widened over the token alphabet by at most this much."""


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """One credential-shaped run: its detector kind and its span in the scanned text.

    Carries no part of the matched value, so its ``repr``/``str`` cannot reveal it.
    ``transforms`` says which decodings exposed it (``percent``, ``base64``...); a
    finding inside decoded base64 spans the whole encoded run.
    """

    kind: str
    start: int
    end: int
    transforms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScanReport:
    """Findings plus counters of the work done (for bounds tests and metrics)."""

    findings: tuple[SecretFinding, ...]
    input_chars: int
    views: int
    windows: int
    chars_searched: int
    """Sum over windows and detectors of the window length handed to the regex engine."""
    decoded_pieces: int


@dataclass
class _State:
    found: dict[tuple[str, int, int], SecretFinding] = field(default_factory=dict)
    views: int = 0
    windows: int = 0
    chars_searched: int = 0
    decoded_pieces: int = 0


def windows(text: str) -> Iterator[tuple[int, int]]:
    """Overlapping ``[start, end)`` windows covering ``text``; ends prefer whitespace."""
    n = len(text)
    start = 0
    while True:
        end = min(start + WINDOW_CHARS, n)
        if end < n:
            # Cut at whitespace inside the last half-overlap when there is one, so a
            # window rarely ends inside a token (the overlap covers it anyway).
            cut = max(
                text.rfind(" ", end - OVERLAP_CHARS // 2, end),
                text.rfind("\n", end - OVERLAP_CHARS // 2, end),
            )
            if cut > 0:
                end = cut + 1
        yield (start, end)
        if end >= n:
            return
        start = end - OVERLAP_CHARS


def _last_index(items: tuple[str, ...], item: str) -> int:
    return max((i for i, x in enumerate(items) if x == item), default=-1)


def _extend(text: str, end: int, alphabet: frozenset[str]) -> int:
    limit = min(len(text), end + EXTEND_MAX_CHARS)
    while end < limit and text[end] in alphabet:
        end += 1
    return end


def _rank(kind: str) -> int:
    """0: a named shape; 1: a vendor shape of the table (``vendor_token``); 2: an
    entropy fallback."""
    return 2 if kind in FALLBACK_KINDS else 1 if kind == VENDOR_KIND else 0


def _without_shadowed(findings: list[SecretFinding]) -> list[SecretFinding]:
    """A finding that overlaps one of a more specific tier adds nothing: a fallback
    (only entropy) under a vendor or named shape, a ``vendor_token`` under a named
    kind. The most specific one says what the credential is."""
    return [
        f
        for f in findings
        if not any(
            _rank(n.kind) < _rank(f.kind) and n.start < f.end and f.start < n.end for n in findings
        )
    ]


GLUED = ("normalized", "joined")
"""The transforms of the view that removed odd whitespace (and nothing after it)."""


def _glued_prose(text: str, finding: SecretFinding) -> bool:
    """A keyword-free token that only the view removing odd whitespace saw, whose
    original is words of prose that odd spaces separate: text typed with non-breaking
    (or thin, ideographic) spaces, not a token split by them (``prose_words``)."""
    return (
        finding.kind == OPAQUE_KIND
        and finding.transforms == GLUED
        and prose_words(odd_space_pieces(text[finding.start : finding.end]))
    )


_Finditer = Callable[[str, int, int], Iterator[re.Match[str]]]


@dataclass(frozen=True, slots=True)
class _Row:
    """One detector as a window runs it, prepared once per scanner (ADR 2600)."""

    detector: Detector
    finditer: _Finditer
    group: str | int
    needs: tuple[frozenset[str], ...]
    """``required_sets`` of the pattern: a pure-ASCII window with no character of one
    of them holds no match, so the regex is not run there. Empty: always run."""


@lru_cache(maxsize=256)
def _row(detector: Detector) -> _Row:
    # Cached per detector: the scanners over one table (the validator's, the log
    # redactor's, reject_secrets' default) derive each condition once per process.
    pattern = detector.pattern
    return _Row(detector, pattern.finditer, detector.value_group(), required_sets(pattern))


CHOSEN_KEPT = 4096
"""Row selections a plan keeps (one per distinct set of conditions met; a tuple each)."""


class _Plan:
    """The rows one kind of view runs, in table order (the order decides which
    transforms the first finding of a span keeps), and the selection of them a
    window's characters call for (ADR 2600)."""

    __slots__ = ("_by_char", "_chosen", "_wants", "rows")

    def __init__(self, rows: tuple[_Row, ...]) -> None:
        self.rows = rows
        # Each distinct condition (a character set) is bit j; per character, the
        # conditions it meets. A row is chosen when all of its conditions are met.
        conditions: dict[frozenset[str], int] = {}
        for row in rows:
            for need in row.needs:
                conditions.setdefault(need, 1 << len(conditions))
        self._by_char: dict[str, int] = {}
        for need, bit in conditions.items():
            for char in need:
                self._by_char[char] = self._by_char.get(char, 0) | bit
        self._wants = tuple(sum(conditions[need] for need in row.needs) for row in rows)
        self._chosen: dict[int, tuple[_Row, ...]] = {}

    def for_window(self, chunk: str) -> tuple[_Row, ...]:
        """The rows whose conditions ``chunk`` meets (every row for non-ASCII text)."""
        if not chunk.isascii():
            return self.rows
        met = 0
        by_char = self._by_char
        for char in set(chunk):
            met |= by_char.get(char, 0)
        chosen = self._chosen.get(met)
        if chosen is None:
            chosen = tuple(
                row
                for row, wants in zip(self.rows, self._wants, strict=True)
                if wants & met == wants
            )
            if len(self._chosen) < CHOSEN_KEPT:
                self._chosen[met] = chosen
        return chosen


class SecretScanner:
    """Finds credential-shaped runs in text. Pure: no I/O, no logging, and nothing kept
    of any text (only the detector plans, and which rows sets of characters select)."""

    def __init__(self, detectors: Iterable[Detector] | None = None) -> None:
        """``detectors`` defaults to the whole table, compiled on the first scan."""
        self._detectors = None if detectors is None else tuple(detectors)
        self._plans: dict[bool, _Plan] = {}

    def _plan(self, glued: bool) -> _Plan:
        """The plan a view runs: built once, on first use (deriving the conditions
        costs a fifth of a second; an importer that never scans pays none), not per
        view. A view that glued lines together runs no contextual detector."""
        plan = self._plans.get(glued)
        if plan is None:
            if self._detectors is None:
                self._detectors = compiled_detectors()
            rows = tuple(_row(d) for d in self._detectors if not (glued and d.contextual))
            plan = _Plan(rows)
            self._plans[glued] = plan
        return plan

    def scan(self, text: str) -> list[SecretFinding]:
        """Findings in ``text``, ordered by span; empty when it looks credential-free."""
        return list(self.inspect(text).findings)

    def inspect(self, text: str) -> ScanReport:
        """Findings plus the work counters."""
        state = _State()
        roots = [normalize(text)]
        if has_odd_space(text):
            roots.append(normalize(text, odd_space=" "))
        for word_wrap in (False, True):
            unwrapped = join_lines(roots[0], word_wrap=word_wrap)
            if unwrapped is not None:
                roots.append(unwrapped)
        for root in roots:
            self._scan_tree(root, 0, state)
        found = [f for f in state.found.values() if not _glued_prose(text, f)]
        findings = _without_shadowed(sorted(found, key=lambda f: (f.start, f.end, f.kind)))
        return ScanReport(
            findings=tuple(findings),
            input_chars=len(text),
            views=state.views,
            windows=state.windows,
            chars_searched=state.chars_searched,
            decoded_pieces=state.decoded_pieces,
        )

    def _scan_tree(self, view: View, depth: int, state: _State) -> None:
        views = [view]
        for _ in range(PERCENT_ROUNDS):
            decoded = percent_decode(views[-1])
            if decoded is None:
                break
            views.append(decoded)
        for current in views:
            self._match(current, state)
            if depth >= MAX_DECODE_DEPTH:
                continue
            for piece in base64_pieces(current):
                state.decoded_pieces += 1
                child = normalize(piece.text, fixed=piece.origin)
                child = View(
                    child.text,
                    (*current.transforms, "base64", *child.transforms),
                    fixed=piece.origin,
                )
                self._scan_tree(child, depth + 1, state)

    def _match(self, view: View, state: _State) -> None:
        state.views += 1
        text = view.text
        # After the last base64 decoding, has a view glued lines together?
        since_decode = view.transforms[_last_index(view.transforms, "base64") + 1 :]
        glued = "unwrapped" in since_decode or "rewrapped" in since_decode
        plan = self._plan(glued)
        for start, end in windows(text):
            state.windows += 1
            # Counted per detector as before: the bound the counter proves is the work
            # the rows may do, whether or not a window's characters spare some of them.
            state.chars_searched += (end - start) * len(plan.rows)
            for row in plan.for_window(text[start:end]):
                detector, group = row.detector, row.group
                for match in row.finditer(text, start, end):
                    if detector.accept is not None and not detector.accept(match.group(group)):
                        continue
                    s, e = match.span(group)
                    if detector.extend is not None:
                        e = _extend(text, e, detector.extend)
                    origin_start, origin_end = view.origin(s, e)
                    key = (detector.kind, origin_start, origin_end)
                    if key not in state.found:
                        state.found[key] = SecretFinding(
                            detector.kind, origin_start, origin_end, view.transforms
                        )
