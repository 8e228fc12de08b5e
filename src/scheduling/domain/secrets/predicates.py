"""Small pure predicates that decide whether a matched run looks like a real secret.

Regexes find credential-*shaped* text; these predicates keep ordinary words, numbers,
placeholders and identifiers from being reported. They see the candidate value only
for the duration of the call and never keep it.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter

_PLACEHOLDER = re.compile(
    r"^(?:\*{3,}|x{3,}|X{3,}|\.{3,}|_{3,}|-{3,}|<[^<>]{0,64}>|\$\{[^{}]{0,64}\}|\$[A-Z_][A-Z0-9_]{0,63}"
    r"|\{\{?[^{}]{0,64}\}?\}|%s|REDACTED|redacted|\[redacted\]|\[REDACTED\])$"
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_WORD_SEPARATORS = re.compile(r"[-_./:,+]")
_WORDLIKE = re.compile(r"^(?:[A-Za-z]+[0-9]{0,2}|[0-9]+)$")
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
# A call or subscript: ``unquote(pw)``, ``os.environ['X']`` (a lone ")" ends a sentence).
_EXPRESSION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,64}[(\[]")


def is_placeholder(value: str) -> bool:
    """A masked or templated value (``***``, ``<password>``, ``${TOKEN}``, ``$DB_PASS``...).

    A ``$NAME`` reference counts only in environment-variable style (upper case), so a
    real password that happens to start with ``$`` is still reported.
    """
    return bool(_PLACEHOLDER.match(value))


def is_uuid(value: str) -> bool:
    """A canonical UUID: an identifier in this product, not a credential on its own."""
    return bool(_UUID.match(value))


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _wordlike(part: str) -> bool:
    """A word or number as people and code write them: ``perl6``, ``Q3``, ``2026``,
    ``SchemeFunction``, ``HTTPHandler`` (camel humps of three letters or more)."""
    if not _WORDLIKE.match(part):
        return False
    alpha = part.rstrip("0123456789")
    if not alpha:
        return True
    humps = _HUMP.findall(alpha)
    return len(humps) == 1 or all(len(h) >= 3 for h in humps)


def _all_wordlike(value: str) -> bool:
    parts = [p for p in _WORD_SEPARATORS.split(value) if p]
    return bool(parts) and all(_wordlike(p) for p in parts)


def _code_like(value: str) -> bool:
    """An expression or attribute path (``unquote(pw)``, ``cfg.password``), not a value."""
    return bool(_EXPRESSION.search(value)) or ("." in value and _all_wordlike(value))


def looks_random(value: str, min_len: int = 12) -> bool:
    """Mixed character classes, not a sequence of plain words/numbers, not a placeholder.

    ``management-2024-report``, ``Q3-roadmap`` and ``Token.Name.Builtin`` are prose or
    code; ``Tr0ub4dor&3``, ``8f3A...`` and a UUID in an ``api_key=`` position are not.
    Long values must also carry some entropy, so ``2026-01-01T09:00:00Z`` stays quiet.
    """
    if len(value) < min_len or is_placeholder(value) or _code_like(value):
        return False
    has_lower = any(c.islower() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    if has_lower + has_upper + has_digit + has_symbol < 2:
        return False
    if _all_wordlike(value):
        return False
    return not (len(value) >= 20 and shannon_entropy(value) < 3.0)


def looks_like_password(value: str, explicit_assignment: bool) -> bool:
    """A password value.

    After ``=`` any non-placeholder value that is not code counts (``password=hunter22``).
    In prose (``:``, ``is``) it needs two character classes and, when it reads as plain
    words, a digit: ``hunter2`` and ``Tr0ub4dor&3`` count, ``see-vault`` does not.
    """
    if len(value) < 6 or is_placeholder(value) or _code_like(value):
        return False
    if explicit_assignment:
        return True
    # Prose ends its sentence after the value (``Password: forgotten? ...``): the stop
    # is punctuation, not a symbol class of the value.
    words = value.rstrip(".!?")
    if words != value and not any(c.isdigit() for c in words) and _all_wordlike(words):
        return False
    has_lower = any(c.islower() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    if has_lower + has_upper + has_digit + has_symbol < 2:
        return False
    return has_digit or not _all_wordlike(value)


def basic_credentials(value: str) -> bool:
    """``value`` is base64 of printable ``user:password`` (what a Basic header carries)."""
    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    user, sep, password = decoded.partition(":")
    return bool(sep) and bool(password) and decoded.isprintable() and len(user) <= 256


def has_digit_and_letter(value: str) -> bool:
    """At least one digit and one letter: random tokens almost always have both."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_HEX = re.compile(r"^(?:[0-9a-f]+|[0-9A-F]+)$")
"""Hex in one case: how digests and commit ids are written (mixed case is a token)."""
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]{12,}")
# A camel-case name: words of 3-15 letters, capitalized but for the first, or one-letter
# version tags (``V2``), and up to four digits at the end only.
_CAMEL_NAME = re.compile(r"(?:[a-z]{3,15})?(?:[A-Z][a-z]{2,14}|[A-Z][0-9]{1,2}){2,}[0-9]{0,4}")
_CAMEL_WORD = re.compile(r"[A-Za-z][a-z]{2,14}")
_VOWEL = re.compile(r"[aeiouy]", re.IGNORECASE)
TOKEN_ENTROPY = 3.5
"""Bits per character a context-free token must carry (gitleaks' generic threshold)."""


def _random_run(value: str) -> bool:
    """A run of 12+ letters and digits no word has: high entropy (``authentication``
    and ``configuration`` carry about 3.2 bits a letter; 12 random characters rarely
    repeat enough to fall under 3.45)."""
    return any(shannon_entropy(run) >= 3.45 for run in _ALNUM_RUN.findall(value))


def _encoded_text(value: str) -> bool:
    """Base64 of readable text (the scanner decodes and scans it as its own view)."""
    padded = value + "=" * (-len(value) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return (
        decoded.isprintable() and sum(c.isalpha() or c == " " for c in decoded) > len(decoded) * 0.7
    )


def looks_like_token(value: str) -> bool:
    """A credential on its own, with no keyword around it: a long run of the token
    alphabet carrying at least ``TOKEN_ENTROPY`` bits per character that is not a
    plain hex digest or commit id (identifiers people paste in prose), not a UUID, not
    digits only, not a path or dotted name of words (``reports/2026/daily.csv``).
    Vendor prefixes (``glsa_``, ``dapi``, ``ATATT``) keep hex bodies reportable."""
    core = value.rstrip(".=")
    if len(core) < 20 or is_placeholder(core) or is_uuid(core) or core.isdigit():
        return False
    if _assignment(core):
        return False
    if _HEX.match(core) or shannon_entropy(core) < TOKEN_ENTROPY or _encoded_text(core):
        return False
    # A long random run, not a slug with a short random suffix (``erasure-probe-<hex>``,
    # ``deploy-3f2a9c1d``): those are names people give things.
    # A hex run counts when long (32+) and behind a vendor prefix (``pul-<40 hex>``).
    return any(
        shannon_entropy(run) >= 3.45
        and (not _HEX.match(run) or (len(run) >= 32 and len(run) < len(core)))
        and not camel_case_name(run)
        for run in _ALNUM_RUN.findall(core)
    )


def camel_case_name(run: str) -> bool:
    """A name people write in camel case (``PaymentGatewayClientTest``,
    ``QuarterlyRevenueReport2026``, ``InvoiceRendererV2Test``): words of 3-15 letters,
    each with a vowel, capitalized but for the first, or version tags, digits only at
    the end. Its humps carry a token's entropy, yet a random run of the token alphabet
    is almost never cut so: about 2 in a million random 20-40 character runs (seeded
    draw), where an upper-case letter falls every 2.4 characters and digits anywhere."""
    if not _CAMEL_NAME.fullmatch(run):
        return False
    return all(_VOWEL.search(word) for word in _CAMEL_WORD.findall(run))


# A word of prose as typed: lower case, capitalized or a short acronym, a short number
# after it (``Q3``), or a number; a full stop or hyphen may end it.
_TYPED_WORD = re.compile(r"(?:(?:[A-Z]?[a-z]{1,20}|[A-Z]{1,5})[0-9]{0,2}|[0-9]{1,4})[.-]?")


def prose_words(pieces: list[str]) -> bool:
    """Two or more words of prose (``summarize``, ``Report``, ``PDF``, ``Q3``,
    ``2026``), each word of four letters or more with a vowel: the pieces of a text
    typed with non-breaking spaces, where a token split by odd spaces has a piece of
    mixed case, digits inside or symbols (``ghp_``, ``aB3x``)."""
    return len(pieces) >= 2 and all(
        _TYPED_WORD.fullmatch(piece) is not None
        and (sum(c.isalpha() for c in piece) < 4 or _VOWEL.search(piece) is not None)
        for piece in pieces
    )


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _assignment(value: str) -> bool:
    """``max_tokens=4096``, ``session_id=<uuid>``: another name and value, not a token."""
    head, sep, _ = value.rstrip("=").partition("=")
    return bool(sep) and bool(_IDENTIFIER.match(head)) and _all_wordlike(head)


_PROSE_WORD = re.compile(r"^[A-Za-z]{1,24}(?:'[a-z]{1,3})?[.,;:!?]?$")


def decodes_to_prose(value: str) -> bool:
    """Base64 of plain words (``VGhlIHF1aWNr...`` is "The quick..."): printable ASCII
    of at least three whitespace-separated words, nearly all of them letters only.
    Not a secret by itself; anything credential-shaped inside it is still found in
    the scanner's decoded view, which scans the decoded text like any other."""
    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        try:
            raw = base64.urlsafe_b64decode(padded)
        except (binascii.Error, ValueError):
            return False
    try:
        decoded = raw.decode("ascii")
    except UnicodeDecodeError:
        return False
    words = decoded.split()
    if len(words) < 3 or not decoded.isprintable():
        return False
    return sum(bool(_PROSE_WORD.match(w)) for w in words) >= 0.9 * len(words)


def looks_random_value(value: str) -> bool:
    """A value after a name and an assignment: random-looking (``looks_random``) or,
    when it reads as words, a run no word has. Base64 of plain prose is neither."""
    if _assignment(value) or decodes_to_prose(value):
        return False
    if sum(c.isalpha() for c in value) < 4:
        return False
    return looks_random(value) or (not is_placeholder(value) and _random_run(value))
