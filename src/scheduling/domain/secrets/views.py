"""Normalized views of the scanned text, each able to map a span back to the original.

Obfuscation is undone before matching, so one detector table serves every encoding:

* ``normalize``: NFKC per character (fullwidth and compatibility forms become ASCII),
  and removal of characters that only hide a split: format/control characters
  (zero-width space/joiners, BOM, soft hyphen, bidi marks), combining marks, and
  whitespace other than space, tab, CR and LF (NBSP, thin/hair/ideographic spaces).
* ``join_lines``: line breaks removed, so wrapped tokens and base64 bodies rejoin.
* ``percent_decode``: ``%XX`` escapes of printable ASCII become the character.
* ``base64_pieces``: plausible base64/base64url runs, decoded in bounded aligned
  pieces; the decoded text becomes a child view whose every span maps to the run.

A view keeps, per character, the original start and end offsets (``array('q')``,
compact even for megabyte inputs); pure printable-ASCII text needs no arrays.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

# Characters that need per-character handling; everything else is copied in bulk.
_SPECIAL = re.compile(r"[^\x20-\x7e\t\n\r]")
_KEEP_WHITESPACE = frozenset(" \t\n\r")
_LINE_BREAK = re.compile(r"[ \t]{0,64}\r?\n")
_INDENT = re.compile(r"[ \t]{0,64}")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
# A base64/base64url run. One character class, so matching is linear; the lookbehind
# keeps the engine from re-entering the middle of a run.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")

MIN_BASE64_RUN = 16
"""Shorter runs decode to at most 11 bytes: too short to carry a credential phrase."""
BASE64_PIECE_CHARS = 4096
"""Long runs are decoded in aligned pieces of this many characters (a multiple of 4)."""
BASE64_PIECE_OVERLAP = 1024
"""Consecutive pieces overlap by this many characters, so a credential of up to 768
decoded bytes is whole inside some piece."""
MIN_PRINTABLE_RATIO = 0.85
"""Decoded bytes are scanned only when they are mostly printable UTF-8 text."""


@dataclass(frozen=True, slots=True)
class View:
    """Text to match plus the map from its spans to spans of the original input."""

    text: str
    transforms: tuple[str, ...]
    starts: array[int] | None = None
    ends: array[int] | None = None
    fixed: tuple[int, int] | None = None

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The original-input span that produced ``text[start:end]``."""
        if self.fixed is not None:
            return self.fixed
        if self.starts is None or self.ends is None:
            return (start, end)
        if end <= start:
            return (self.starts[start], self.starts[start])
        return (self.starts[start], self.ends[end - 1])


def _hidden(char: str) -> bool:
    """Invisible characters that only ever hide a split: always removed."""
    return unicodedata.category(char) in ("Cf", "Cc", "Mn", "Me")


def _odd_space(char: str) -> bool:
    """Whitespace other than space, tab, CR, LF (NBSP, thin/ideographic space...)."""
    return char not in _KEEP_WHITESPACE and (
        char.isspace() or unicodedata.category(char) in ("Zs", "Zl", "Zp")
    )


def has_odd_space(text: str) -> bool:
    """Whether ``text`` holds whitespace that ``normalize`` would treat specially."""
    return any(_odd_space(m.group()) for m in _SPECIAL.finditer(text))


def odd_space_pieces(text: str) -> list[str]:
    """``text`` split at its odd whitespace (the pieces ``normalize`` glues together),
    empty pieces left out."""
    pieces: list[str] = []
    cursor = 0
    for match in _SPECIAL.finditer(text):
        if _odd_space(match.group()):
            pieces.append(text[cursor : match.start()])
            cursor = match.end()
    pieces.append(text[cursor:])
    return [piece for piece in pieces if piece]


def normalize(text: str, *, odd_space: str = "", fixed: tuple[int, int] | None = None) -> View:
    """NFKC and hidden-split removal over ``text``.

    Odd whitespace becomes ``odd_space``: removed (``""``, joins a split token) or a
    plain space (``" "``, keeps a legitimate separator such as ``Bearer\u00a0<token>``);
    the scanner matches both views when odd whitespace is present. With ``fixed``
    every span maps to that original span (decoded children); otherwise offsets are
    positions in ``text`` itself (the original input).
    """
    if not _SPECIAL.search(text):
        return View(text, (), fixed=fixed)
    pieces: list[str] = []
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    cursor = 0
    for match in _SPECIAL.finditer(text):
        i = match.start()
        if i > cursor:
            pieces.append(text[cursor:i])
            starts.extend(range(cursor, i))
            ends.extend(range(cursor + 1, i + 1))
        cursor = i + 1
        char = match.group()
        if _odd_space(char):
            folded = odd_space
        elif _hidden(char):
            continue
        else:
            folded = "".join(
                " " if _odd_space(c) else c
                for c in unicodedata.normalize("NFKC", char)
                if not _hidden(c)
            )
        pieces.append(folded)
        starts.extend([i] * len(folded))
        ends.extend([i + 1] * len(folded))
    if cursor < len(text):
        pieces.append(text[cursor:])
        starts.extend(range(cursor, len(text)))
        ends.extend(range(cursor + 1, len(text) + 1))
    transforms = ("normalized",) if odd_space else ("normalized", "joined")
    if fixed is not None:
        return View("".join(pieces), transforms, fixed=fixed)
    return View("".join(pieces), transforms, starts, ends)


def _printable_ascii(code: int) -> bool:
    return 0x20 <= code <= 0x7E or code in (0x09, 0x0A, 0x0D)


def _copy_map(view: View, a: int, b: int, starts: array[int], ends: array[int]) -> None:
    """Append the origin map of ``view.text[a:b]`` (identity, or a slice of the arrays)."""
    if view.starts is None or view.ends is None:
        starts.extend(range(a, b))
        ends.extend(range(a + 1, b + 1))
    else:
        starts.extend(view.starts[a:b])
        ends.extend(view.ends[a:b])


def percent_decode(view: View) -> View | None:
    """One round of ``%XX`` decoding of printable ASCII, or None when nothing decodes."""
    text = view.text
    if "%" not in text:
        return None
    keep_map = view.fixed is None
    pieces: list[str] = []
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    cursor = 0
    for match in _PERCENT.finditer(text):
        code = int(match.group(1), 16)
        if not _printable_ascii(code):
            continue
        i = match.start()
        pieces.append(text[cursor:i])
        pieces.append(chr(code))
        if keep_map:
            _copy_map(view, cursor, i, starts, ends)
            starts.append(view.origin(i, i + 1)[0])
            ends.append(view.origin(i + 2, i + 3)[1])
        cursor = i + 3
    if cursor == 0:
        return None
    pieces.append(text[cursor:])
    transforms = (*view.transforms, "percent")
    if not keep_map:
        return View("".join(pieces), transforms, fixed=view.fixed)
    _copy_map(view, cursor, len(text), starts, ends)
    return View("".join(pieces), transforms, starts, ends)


def _indent(text: str, at: int) -> int:
    match = _INDENT.match(text, at)
    return match.end() - at if match else 0


def _ends_word(text: str, end: int) -> bool:
    """Whether the non-space run before ``end`` reads as a word (a word-wrap point)."""
    start = end
    while start > 0 and end - start < 64 and not text[start - 1].isspace():
        start -= 1
    segment = text[start:end]
    if not segment or segment[-1] in ".,;:!?)]}\"'":
        return True
    return segment.isdigit() or (
        segment.isalpha() and (segment.islower() or segment.isupper() or segment.istitle())
    )


def join_lines(view: View, *, word_wrap: bool) -> View | None:
    """The view with line breaks removed, so wrapped tokens and base64 bodies rejoin.

    Blanks around a break go too (hanging indents, indented PEM/base64 blocks). With
    ``word_wrap`` a break after a plain word or punctuation becomes a space instead (a
    wrapper replaced a space there), so a token that starts a wrapped line is not glued
    to the word before it; the scanner matches both variants. Ordinary spaces inside a
    line are kept: joining words would turn prose into token-shaped runs. None when the
    text has no line break.
    """
    text = view.text
    if "\n" not in text:
        return None
    keep_map = view.fixed is None
    pieces: list[str] = []
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    cursor = 0
    for match in _LINE_BREAK.finditer(text):
        pieces.append(text[cursor : match.start()])
        if keep_map:
            _copy_map(view, cursor, match.start(), starts, ends)
        if word_wrap and _ends_word(text, match.start()):
            pieces.append(" ")
            if keep_map:
                starts.append(view.origin(match.start(), match.start() + 1)[0])
                ends.append(view.origin(match.end() - 1, match.end())[1])
        cursor = match.end() + _indent(text, match.end())
    pieces.append(text[cursor:])
    transforms = (*view.transforms, "rewrapped" if word_wrap else "unwrapped")
    if not keep_map:
        return View("".join(pieces), transforms, fixed=view.fixed)
    _copy_map(view, cursor, len(text), starts, ends)
    return View("".join(pieces), transforms, starts, ends)


@dataclass(frozen=True, slots=True)
class DecodedPiece:
    """Decoded text of one aligned piece of a base64 run, and the run's original span."""

    text: str
    origin: tuple[int, int]


def _decode(piece: str) -> str | None:
    body = piece.rstrip("=").replace("-", "+").replace("_", "/")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    decoded = raw.decode("utf-8", errors="ignore")
    if len(decoded) < 8 or len(decoded.encode("utf-8")) < MIN_PRINTABLE_RATIO * len(raw):
        return None
    printable = sum(1 for c in decoded if c.isprintable() or c in "\t\n\r")
    if printable < MIN_PRINTABLE_RATIO * len(decoded):
        return None
    return decoded


def base64_pieces(view: View) -> Iterator[DecodedPiece]:
    """Every plausible-text decoding of base64 runs in ``view``, in bounded pieces.

    Work is linear: runs are disjoint, and each character of a run is decoded at most
    twice (pieces overlap by a quarter).
    """
    step = BASE64_PIECE_CHARS - BASE64_PIECE_OVERLAP
    for match in _BASE64_RUN.finditer(view.text):
        run = match.group()
        origin = view.origin(match.start(), match.end())
        offset = 0
        while True:
            decoded = _decode(run[offset : offset + BASE64_PIECE_CHARS])
            if decoded is not None:
                yield DecodedPiece(decoded, origin)
            if offset + BASE64_PIECE_CHARS >= len(run):
                break
            offset += step
