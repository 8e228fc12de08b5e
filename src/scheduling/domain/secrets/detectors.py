"""The detector table: one row per credential shape, each a bounded regex.

Rules every pattern follows (``tests/unit/test_secret_scanner_bounds.py`` checks them
on the parsed patterns): every repetition has a finite maximum, no repetition contains
another repetition, and the longest possible match is at most ``MAX_MATCH_CHARS``. So
the engine does a bounded amount of work per start position, and a window overlap of
``MAX_MATCH_CHARS`` guarantees every match lies whole inside some window. Patterns start
with a distinctive literal or a lookbehind so most positions fail on the first character.

A pattern with a ``secret`` group reports that group's span (the value, not its name).
``accept`` filters on the candidate value; ``extend`` widens a match over the token's
alphabet so the span covers the whole token even when the regex stops at its bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from scheduling.domain.secrets import vendors
from scheduling.domain.secrets.predicates import (
    basic_credentials,
    has_digit_and_letter,
    is_placeholder,
    is_uuid,
    looks_like_password,
    looks_like_token,
    looks_random,
    looks_random_value,
)

MAX_MATCH_CHARS = 2048
"""Upper bound on the length of any single regex match (checked by a test)."""

_B64URL = "A-Za-z0-9_-"
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_TOKEN_CHARS = _ALNUM | frozenset("_-")
_JWT_CHARS = _TOKEN_CHARS | frozenset(".")
_OPAQUE_CHARS = _ALNUM | frozenset("._~+/-=")
# A key block's body after its header: base64 lines, indented or not, or one line whose
# breaks are written ``\n`` (a JSON string). The span covers the key, not just its name.
_KEY_BODY_CHARS = _ALNUM | frozenset("+/=\r\n\t \\")
# A bare base64 key body (no header): its lines, not the prose after it.
_BASE64_BODY_CHARS = _ALNUM | frozenset("+/=\r\n")
# Separators between a name and its value: ``:``, ``=``, ``=>``, or the word ``is``.
_ASSIGN = r"[\"']?(?:\s{0,4}(?::=|:|=>|=)\s{0,4}|\s{1,4}is\s{1,4})[\"']?"
_API_KEY_NAMES = (
    r"(?<![A-Za-z])(?:api[_-]?key|apikey|api[_-]?secret|api[_-]?token|access[_-]?key"
    r"|secret[_-]?key|client[_-]?secret|app[_-]?secret|consumer[_-]?secret|private[_-]?token"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|x-api-key)"
)
"""The names of an API key or client secret (``generic_api_key_assignment``)."""
# A name suffix that keeps the keyword a whole word part: ``token_v2``, ``secret.prod``.
_SUFFIX = r"(?:[_.-][A-Za-z0-9_.-]{0,24})?"


CONTEXTUAL_KINDS = frozenset(
    {
        "aws_secret_key",
        "gcp_service_account_key",
        "azure_storage_key",
        "azure_sas_token",
        "bearer_token",
        "basic_auth_header",
        "authorization_header",
        "password_in_url",
        "password_assignment",
        "session_cookie",
        "generic_api_key_assignment",
        "high_entropy_assignment",
        "keyed_high_entropy",
        # Not keyword-bound, but a run glued from two lines is no pasted token.
        "opaque_token",
    }
)

FALLBACK_KINDS = frozenset({"keyed_high_entropy", "opaque_token"})
"""Kinds recognized by entropy alone; dropped where a named kind covers the same span."""
"""Kinds recognized by a keyword or structure around the value rather than its shape."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One credential shape: the kind it reports and how to recognize it."""

    kind: str
    pattern: re.Pattern[str]
    accept: Callable[[str], bool] | None = None
    extend: frozenset[str] | None = None
    contextual: bool = False
    """Recognized by surrounding words (``password=``, ``Bearer``), not by its own shape.
    Not run on the views that join lines (they would glue a value to the next line's
    first word); a keyword and its value on one line, or split by the break itself
    (``Bearer\\n<token>``), are matched in the other views."""

    def value_group(self) -> str | int:
        """The group whose span is reported: ``secret`` when present, else the match."""
        return "secret" if "secret" in self.pattern.groupindex else 0


class _Entry(NamedTuple):
    """A detector before its pattern is compiled: the table is written as these, and
    compiled on first use (``compiled_detectors()``), because compiling about a hundred
    patterns costs every importer some 16 ms, a command that never scans included."""

    kind: str
    pattern: str
    flags: int
    accept: Callable[[str], bool] | None
    extend: frozenset[str] | None


def _d(
    kind: str,
    pattern: str,
    accept: Callable[[str], bool] | None = None,
    *,
    extend: frozenset[str] | None = None,
    ignore_case: bool = True,
) -> _Entry:
    return _Entry(kind, pattern, re.IGNORECASE if ignore_case else 0, accept, extend)


def _random_not_uuid(value: str, min_len: int = 12) -> bool:
    return looks_random(value, min_len) and not is_uuid(value)


def _aws_key_id(value: str) -> bool:
    # AKIA/ASIA are distinctive; the rarer prefixes also need a digit to stay quiet
    # on shouted words.
    return value[:4] in ("AKIA", "ASIA") or any(c.isdigit() for c in value)


def _password_after_equals(value: str) -> bool:
    return looks_like_password(value, explicit_assignment=True)


def _password_in_prose(value: str) -> bool:
    return looks_like_password(value, explicit_assignment=False)


def _mixed_case_with_digit(value: str) -> bool:
    return has_digit_and_letter(value) and value.lower() != value and value.upper() != value


def _url_password(value: str) -> bool:
    # Any non-placeholder password in a URL is a credential, even a short one.
    return not is_placeholder(value)


_TABLE: tuple[_Entry, ...] = (
    # --- private keys -------------------------------------------------------------
    _d(
        "private_key_block",
        r"-----BEGIN[ A-Z0-9]{0,32}PRIVATE ?KEY(?: ?BLOCK)?-----",
        extend=_KEY_BODY_CHARS,
    ),
    _d("private_key_block", r"PuTTY-User-Key-File-[0-9]{1,2}:"),
    # Bare bodies: "openssh-key-v1" and DER RSA (PKCS#1) / PKCS#8 private keys in base64.
    _d(
        "private_key_block",
        r"b3BlbnNzaC1rZXktdjE",
        extend=_BASE64_BODY_CHARS,
        ignore_case=False,
    ),
    _d(
        "private_key_block",
        r"MII[A-Za-z0-9+/]{2}IBA(?:AKC|DANBgkqhkiG9w0BAQEFAASC)",
        extend=_BASE64_BODY_CHARS,
        ignore_case=False,
    ),
    # --- cloud providers ----------------------------------------------------------
    _d(
        "aws_access_key",
        r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)"
        r"[A-Z0-9]{16}(?![A-Z0-9])",
        _aws_key_id,
        ignore_case=False,
    ),
    _d(
        "aws_secret_key",
        r"(?<![A-Za-z])aws[A-Za-z0-9_.-]{0,24}(?:secret|sk)[A-Za-z0-9_.-]{0,24}"
        + _ASSIGN
        + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        looks_random,
    ),
    _d("google_api_key", r"(?<![A-Za-z0-9_-])AIza[" + _B64URL + r"]{35}(?![A-Za-z0-9_-])"),
    _d(
        "google_oauth_token",
        r"(?<![A-Za-z0-9])ya29\.[" + _B64URL + r"]{20,512}",
        extend=_TOKEN_CHARS,
    ),
    _d(
        "gcp_service_account_key",
        r"\"private_key_id\"\s{0,4}:\s{0,4}\"(?P<secret>[a-f0-9]{40})\"",
    ),
    _d(
        "azure_storage_key",
        r"AccountKey\s{0,2}=\s{0,2}(?P<secret>[A-Za-z0-9+/]{86}==)",
    ),
    _d(
        "azure_sas_token",
        r"[?&]sig=(?P<secret>[A-Za-z0-9%+/]{30,256}={0,2})",
        looks_random,
    ),
    _d(
        "azure_client_secret",
        # A trailing "." may end the sentence, so the lookahead does not forbid it.
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~-])",
        ignore_case=False,
    ),
    _d("digitalocean_token", r"(?<![A-Za-z0-9])do[por]_v1_[a-f0-9]{64}"),
    # --- code hosting and package registries ---------------------------------------
    _d(
        "github_token",
        r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9])",
        has_digit_and_letter,
    ),
    _d("github_token", r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{60,255}"),
    _d("gitlab_token", r"(?<![A-Za-z0-9_])glpat-[" + _B64URL + r"]{20,64}", has_digit_and_letter),
    _d("npm_token", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", has_digit_and_letter),
    _d("pypi_token", r"pypi-AgEIcHlwaS5vcmc[" + _B64URL + r"]{40,512}", extend=_TOKEN_CHARS),
    # --- messaging, payments, AI providers -------------------------------------------
    _d(
        "slack_token",
        r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,250}",
        has_digit_and_letter,
    ),
    _d(
        "slack_webhook",
        r"hooks\.slack\.com/services/T[A-Za-z0-9_]{6,16}/B[A-Za-z0-9_]{6,16}/[A-Za-z0-9]{16,40}",
    ),
    _d("stripe_key", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,247}"),
    _d("stripe_key", r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{24,64}"),
    _d("sendgrid_key", r"(?<![A-Za-z0-9])SG\.[" + _B64URL + r"]{22}\.[" + _B64URL + r"]{43}"),
    _d("mailgun_key", r"(?<![A-Za-z0-9])key-[0-9a-z]{32}(?![A-Za-z0-9])", has_digit_and_letter),
    _d("shopify_token", r"(?<![A-Za-z0-9])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _d(
        "huggingface_token",
        r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,64}(?![A-Za-z0-9])",
        has_digit_and_letter,
    ),
    _d("anthropic_key", r"(?<![A-Za-z0-9])sk-ant-[" + _B64URL + r"]{20,256}", extend=_TOKEN_CHARS),
    _d(
        "openai_key",
        r"(?<![A-Za-z0-9])sk-(?!ant-)(?:proj-|svcacct-|admin-)?(?P<secret>["
        + _B64URL
        + r"]{20,256})",
        has_digit_and_letter,
        extend=_TOKEN_CHARS,
    ),
    # --- generic token formats ----------------------------------------------------
    _d(
        "jwt",
        r"(?<![A-Za-z0-9_-])eyJ[" + _B64URL + r"]{8,600}\.eyJ[" + _B64URL + r"]{4,64}",
        extend=_JWT_CHARS,
    ),
    _d(
        "bearer_token",
        r"\bbearer\s{1,8}(?P<secret>[A-Za-z0-9._~+/-]{16,1024}={0,4})",
        _random_not_uuid,
    ),
    _d(
        "basic_auth_header",
        r"\bbasic\s{1,8}(?P<secret>[A-Za-z0-9+/]{8,1024}={0,2})",
        basic_credentials,
    ),
    _d(
        "authorization_header",
        r"\b(?:proxy-)?authorization[\"']?\s{0,4}[:=]\s{0,4}[\"']?"
        r"(?:(?:token|digest|apikey|sso-key|key)\s{1,4})?"
        r"(?P<secret>[A-Za-z0-9._~+/=-]{12,1024})",
        _random_not_uuid,
    ),
    _d(
        "password_in_url",
        r"\b[a-z][a-z0-9+.-]{1,24}://[^\s:/?#@\[\]]{0,128}:(?P<secret>[^\s/?#@\[\]]{1,128})@"
        r"[A-Za-z0-9._~-]{1,253}",
        _url_password,
    ),
    _d(
        "password_assignment",
        r"(?<![A-Za-z])(?:password|passwd|passphrase|passcode|pwd|pass)"
        + _SUFFIX
        + r"[\"']?\s{0,4}(?::=|=|=>)\s{0,4}[\"']?(?P<secret>[^\s\"'<>,;]{6,128})",
        _password_after_equals,
    ),
    _d(
        "password_assignment",
        r"(?<![A-Za-z])(?:password|passwd|passphrase|passcode|pwd)"
        + _SUFFIX
        + r"[\"']?(?:\s{0,4}:\s{0,4}|\s{1,4}(?:is|was)\s{1,4})[\"']?"
        + r"(?P<secret>[^\s\"'<>,;]{6,128})",
        _password_in_prose,
    ),
    _d(
        "session_cookie",
        r"\b(?:set-)?cookie\s{0,4}:\s{0,4}[A-Za-z0-9_.!#$&*+^|~-]{1,64}="
        r"(?P<secret>[^\s;,\"']{16,1024})",
        _random_not_uuid,
    ),
    _d(
        "session_cookie",
        r"(?<![A-Za-z])(?:session|sess|sid|csrftoken|remember_token|__Secure-|__Host-)"
        r"[A-Za-z0-9_.-]{0,32}\s{0,2}=\s{0,2}(?P<secret>[A-Za-z0-9%._~+/=:-]{16,1024})",
        _random_not_uuid,
    ),
    _d(
        "generic_api_key_assignment",
        _API_KEY_NAMES + _SUFFIX + _ASSIGN + r"(?P<secret>[A-Za-z0-9._~+/=-]{12,512})",
        looks_random,
    ),
    # A quoted value ends at its quote, so it may hold any symbol (a Django SECRET_KEY,
    # a generated client secret): ``secret_key = 'k8#m2!x@...'``.
    _d(
        "generic_api_key_assignment",
        _API_KEY_NAMES
        + _SUFFIX
        + r"[\"']?\s{0,4}(?::=|:|=>|=)\s{0,4}(?P<quote>[\"'])"
        + r"(?P<secret>[^\s\"']{12,512})(?P=quote)",
        looks_random,
    ),
    _d(
        "high_entropy_assignment",
        r"(?<![A-Za-z])(?:token|secret|credentials?|creds|signature|sig|auth|bearer|cookie)"
        + _SUFFIX
        + _ASSIGN
        + r"(?P<secret>[A-Za-z0-9._~+/=-]{16,512})",
        _random_not_uuid,
    ),
)

# Names whose values are identifiers people paste on purpose: a digest, a commit, a
# version, a URL scheme (``https:``) or a query-string field. Matched as a whole word
# part at the start of the name (``commit_sha`` is one, ``hashicorp`` is not).
_IDENTIFIER_NAMES = (
    r"(?!(?:sha\d{0,3}|md5|commit|digest|checksum|hash|etag|uuid|guid|id|ref|rev|revision"
    r"|version|build|tag|branch|https?|s?ftp|ssh|git|file|wss?|mailto|v|page|from|to|date"
    r"|time|limit|format|utm)(?![A-Za-z0-9]))"
)

_TABLE += (
    # Any name, any assignment gitleaks' rules write (``=``, ``:``, ``:=``, ``=>``,
    # ``?=``, ``||``), a random value: the vendor name is the keyword (``meraki=``,
    # ``airtable: ``), so no list of vendors is needed (ADR 1812).
    _d(
        "keyed_high_entropy",
        r"(?<![A-Za-z0-9_.-])"
        + _IDENTIFIER_NAMES
        + r"[A-Za-z][A-Za-z0-9_.-]{0,40}(?<![_.-]id)(?<!uuid)[\"']?,?\s{0,3}"
        r"(?::=|=>|\?=|\|\||[:=>])\s{0,4}[\"'`]{0,2}"
        # A value that is itself ``name=...`` is left to the match at that name.
        r"(?![A-Za-z_]{1,40}(?::=|=>|[:=]))"
        r"(?P<secret>[A-Za-z0-9._~+/=-]{12,512})",
        looks_random_value,
    ),
    # A credential with no keyword at all: a vendor token pasted alone (``dapi...``,
    # ``ATATT3...``, ``glsa_...``); see ``looks_like_token`` for what stays quiet.
    _d(
        "opaque_token",
        r"(?<![A-Za-z0-9_+/=.@%|-])(?<!base64,)"
        r"(?P<secret>[A-Za-z0-9][A-Za-z0-9_+/=.%|-]{19,511})",
        looks_like_token,
        ignore_case=False,
    ),
)

# Formats of gitleaks' and detect-secrets' public rules the shapes above miss (ADR 1812).
_TABLE += (
    _d("private_key_block", r"\bBEGIN[ A-Z0-9]{0,32}PRIVATE KEY(?: BLOCK)?\b", ignore_case=False),
    _d(
        "telegram_bot_token",
        r"(?<![A-Za-z0-9])\d{5,16}:(?P<secret>[A-Za-z0-9_-]{34,35})(?![A-Za-z0-9_-])",
        looks_random,
    ),
    _d(
        "password_in_url",
        r"://[^\s/@:{}]{1,128}:(?P<secret>[^\s/@{}]{3,256})@",
        _url_password,
    ),
    _d("npm_token", r"_auth(?:Token)?\s{0,4}=\s{0,4}(?P<secret>[^\s\"']{8,512})", _url_password),
    _d(
        "slack_webhook",
        r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/[A-Za-z0-9_]{8,64}",
    ),
    # gitleaks writes the dots unescaped; so does this, to match what it matches.
    _d("slack_webhook", r"hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}"),
    _d(
        "authorization_header",
        r"\bcurl\b.{0,100}?(?:-H|--header)[\s=]{0,2}[\"']?(?:Authorization|Token|Key|X-API-Key)"
        r"\s{0,2}:\s{0,2}(?:(?:Bearer|Basic|Token)\s{1,2})?(?P<secret>[^\s\"']{6,256})",
        _url_password,
    ),
    _d(
        "password_assignment",
        r"\bcurl\b.{0,100}?(?:-u|--user)[\s=\"']{0,3}(?P<secret>[^\s:]{1,128}:[^\s]{3,256})",
        _url_password,
    ),
    _d(
        "teams_webhook",
        r"\.webhook\.office\.com/webhookb2/[a-z0-9-]{36}@[a-z0-9-]{36}/IncomingWebhook/"
        r"(?P<secret>[a-z0-9]{32})",
    ),
    _d(
        "onepassword_secret_key",
        r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}"
        r"-[A-Z0-9]{5}\b",
        ignore_case=False,
    ),
    _d("facebook_token", r"\b\d{15,16}[|%](?P<secret>[0-9a-z_-]{27,40})\b", looks_random_value),
    _d("flutterwave_key", r"\bFLW(?:SECK|PUBK)_TEST-[a-h0-9]{12,32}(?:-X)?\b", ignore_case=False),
    _d(
        "gitlab_token",
        r"(?<![A-Za-z0-9_])(?:gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas|glffct)-"
        r"[A-Za-z0-9_-]{20,1024}",
        ignore_case=False,
    ),
    _d("sendgrid_key", r"(?<![A-Za-z0-9])SG\.[A-Za-z0-9=_.-]{66}", ignore_case=False),
    _d("slack_token", r"(?<![A-Za-z0-9])xapp-\d-[A-Z0-9]{1,32}-\d{1,32}-[a-z0-9]{1,128}"),
    _d(
        "artifactory_token",
        r"(?<![A-Za-z0-9])(?:AKC[A-Za-z0-9]{10,128}|AP[0-9A-F][A-Za-z0-9]{8,128})(?![A-Za-z0-9])",
        _mixed_case_with_digit,
        ignore_case=False,
    ),
    _d("softlayer_key", r"api.softlayer.com/soap/v3(?:.1)?/(?P<secret>[a-z0-9]{64})"),
    _d(
        "sidekiq_secret",
        r"BUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM[\"']?\s{0,3}(?::=|=>|[:=])\s{0,3}[\"']?"
        r"(?P<secret>[a-f0-9]{8}:[a-f0-9]{8})",
    ),
    _d(
        "password_assignment",
        r"key=\"(?:Cleartext)?Password\"\s{0,4}value=\"(?P<secret>[^\"]{4,256})\"",
        _url_password,
    ),
)

# Vendor shapes by structure alone, whatever their body's entropy (ADR 2131).
VENDOR_KIND = "vendor_token"
OPAQUE_KIND = "opaque_token"
"""The keyword-free token kind (``looks_like_token``)."""
_TABLE += (_d(VENDOR_KIND, vendors.PATTERN, ignore_case=False),)

DETECTOR_KINDS: frozenset[str] = frozenset(entry.kind for entry in _TABLE)
"""Every kind a finding can carry."""


@cache
def compiled_detectors() -> tuple[Detector, ...]:
    """Every detector, its pattern compiled: the table, in order, compiled once."""
    return tuple(
        Detector(
            entry.kind,
            re.compile(entry.pattern, entry.flags),
            entry.accept,
            entry.extend,
            entry.kind in CONTEXTUAL_KINDS,
        )
        for entry in _TABLE
    )


DETECTORS: tuple[Detector, ...]
"""``compiled_detectors()``, read as a name (module ``__getattr__``, PEP 562): compiled when
first read, so importing this module compiles nothing."""


def __getattr__(name: str) -> object:
    if name == "DETECTORS":
        return compiled_detectors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
