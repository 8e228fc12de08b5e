"""gate.schedule.no_credentials: short keyword-bound credentials, and a token astride a window.

The seeded corpora plant values long or random enough that the entropy fallbacks
(``keyed_high_entropy``, ``opaque_token``) would refuse them even if the named detector
that should recognise them were weakened. These cases are the ones only the named
detector sees, each too short for a fallback (a password of 8-9 characters, an API token
of 16-19):

* a password quoted after ``=`` (``password="hunter22"``, ``db_password='...'``),
* a password whose name carries a dotted or dashed suffix (``password.prod=``,
  ``password-eu=``),
* an ``Authorization`` header with the ``Bearer``, ``Token`` or ``apikey`` scheme and a
  16-19 character value,
* a token named in prose with ``is`` after ``auth`` or ``signature``,
* a bearer header in text whose only blanks are tabs (a pasted TSV row).

Each goes through ``ScheduleService`` on real PostgreSQL (create, title, patch, update)
and must be rejected with ``schedule.secret_detected`` without reaching a row or a log;
the same text logged through the process handler (text and JSON) must lose the value.
The near misses in ``corpora.near_miss`` (each keyword followed by words) must be
accepted, so refusing everything near a keyword does not pass.

Last, a JWT with a 450-character header (a ``kid`` or ``x5c`` header) that starts a few
hundred characters before the scanner's first window ends: a log line must lose all of
it. The rejection path also refuses it by entropy, but the log redactor ignores the
entropy-only kinds, so only a window overlap that covers the whole token (every match
whole in some window) keeps its signature out of the line.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import random
import re
import string

import pytest

from gates.checks.corpora import CredentialCase
from gates.checks.corpora.credentials import window_filler
from gates.checks.corpora.near_miss import KEYWORD_NEAR_MISSES
from gates.checks.credential_support import run_corpus_on_postgres
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.secrets import WINDOW_CHARS
from scheduling.logs import LOG_FORMATS, LogFormat, configure

pytestmark = [pytest.mark.gate("gate.schedule.no_credentials")]

SEED = 20261207
ALNUM = string.ascii_letters + string.digits
FRAGMENT_CHARS = 10

PASSWORD_PHRASES = (
    'password="{v}"',
    "db_password='{v}'",
    'PASSWORD => "{v}"',
    "password.prod={v}",
    "smtp-password-eu={v}",
)
TOKEN_PHRASES = (
    "Authorization: Bearer {v}",
    "-H 'Authorization: Bearer {v}'",
    "Authorization: Token {v}",
    "Authorization: apikey {v}",
    "the auth is {v}",
    "the signature is {v}",
)
FRAMES = (
    "every morning log in with {c} and summarize the new invoices",
    "call the partner API ({c}) and report the error rate",
)
TAB_FRAME = "fetch\tthe\tpartner\tfeed\twith\tAuthorization:\tBearer\t{v}\tand\tsummarize\tit"


def _password(rng: random.Random) -> str:
    """8-9 lower-case letters and digits with at least one digit (``hunter22``)."""
    while True:
        value = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(8))
        value += rng.choice(string.digits)
        if any(c.isalpha() for c in value):
            return value


def _token(rng: random.Random) -> str:
    """16-19 letters and digits of every class: too short for ``opaque_token`` (20+)."""
    while True:
        value = "".join(rng.choice(ALNUM) for _ in range(rng.randint(16, 19)))
        classes = (str.isupper, str.islower, str.isdigit)
        if all(any(test(c) for c in value) for test in classes):
            return value


def _case(case_id: str, kind: str, instruction: str, value: str) -> CredentialCase:
    start = instruction.index(value)
    return CredentialCase(
        case_id=case_id,
        kind=kind,
        encoding="plain",
        instruction=instruction,
        secret=value,
        embedded=value,
        span=(start, start + len(value)),
        expected_kinds=frozenset({kind}),
        needles=(value,),
    )


def keyword_cases(seed: int = SEED) -> list[CredentialCase]:
    """Every phrase in every frame, each with its own drawn value, plus the tab rows."""
    rng = random.Random(seed)
    cases: list[CredentialCase] = []
    for n, phrase in enumerate(PASSWORD_PHRASES):
        for m, frame in enumerate(FRAMES):
            value = _password(rng)
            text = frame.replace("{c}", phrase.replace("{v}", value))
            cases.append(_case(f"short-password/{n}/{m}", "password_assignment", text, value))
    for n, phrase in enumerate(TOKEN_PHRASES):
        for m, frame in enumerate(FRAMES):
            value = _token(rng)
            text = frame.replace("{c}", phrase.replace("{v}", value))
            cases.append(_case(f"short-token/{n}/{m}", "bearer_token", text, value))
    for m in range(2):
        value = _token(rng)
        cases.append(
            _case(f"tab-bearer/{m}", "bearer_token", TAB_FRAME.replace("{v}", value), value)
        )
    return cases


def _b64url(document: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).decode().rstrip("=")


def long_header_jwt(rng: random.Random) -> str:
    """A JWT whose header carries a 300-character ``kid`` (about 450 encoded characters)."""
    kid = "".join(rng.choice(ALNUM) for _ in range(300))
    header = _b64url({"alg": "RS256", "typ": "JWT", "kid": kid})
    payload = _b64url({"sub": "alice", "exp": 1900000000})
    signature = "".join(rng.choice(ALNUM + "-_") for _ in range(86))
    return f"{header}.{payload}.{signature}"


def _fragments(value: str) -> list[str]:
    runs = re.findall(r"[A-Za-z0-9]+", value)
    return [run[i : i + FRAGMENT_CHARS] for run in runs for i in range(0, len(run) - 9, 5)]


def _written(kind: LogFormat, message: str, *args: object) -> str:
    stream = io.StringIO()
    log = logging.getLogger(f"gates.checks.no_credentials_keyword_shapes.{kind}")
    log.propagate = False
    handler = configure(stream, kind=kind, level="DEBUG", repeat_window_seconds=1e-9, root=log)
    try:
        log.warning(message, *args)
    finally:
        log.removeHandler(handler)
        handler.close()
    line = stream.getvalue()
    assert line, "the handler wrote nothing: the capture is broken"
    return line


def test_near_misses_are_plain_prose() -> None:
    """The controls hold no drawn value (a guard on the corpus, not on the product)."""
    values = {case.secret for case in keyword_cases()}
    assert not any(value in text for value in values for text in KEYWORD_NEAR_MISSES)


@pytest.mark.postgres
async def test_short_keyword_credentials_are_rejected_and_never_stored(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    cases = keyword_cases()
    report = await run_corpus_on_postgres(
        pg_url, cases, KEYWORD_NEAR_MISSES, log_text=lambda: caplog.text
    )
    gate_evidence.record("seed", SEED)
    gate_evidence.record("cases", report.cases)
    gate_evidence.record("rejected", report.rejected)
    gate_evidence.record("near_misses_accepted", report.benign_accepted)
    assert report.failures == [], f"seed {SEED}: " + "\n".join(report.failures)
    assert report.rejected == report.cases == len(cases), f"seed {SEED}"
    assert report.benign_accepted == len(KEYWORD_NEAR_MISSES), f"seed {SEED}"


@pytest.mark.parametrize("kind", LOG_FORMATS)
def test_short_keyword_credentials_never_reach_a_log_line(kind: LogFormat) -> None:
    leaks = [
        case.case_id
        for case in keyword_cases()
        if case.secret in _written(kind, "could not schedule: %s", case.instruction)
    ]
    assert leaks == [], f"seed {SEED}, {kind}: {leaks}"


@pytest.mark.parametrize("kind", LOG_FORMATS)
@pytest.mark.parametrize("back", [300, 360, 430])
def test_jwt_astride_the_first_window_is_redacted_whole(kind: LogFormat, back: int) -> None:
    """The token starts ``back`` characters before the first window's end and runs
    past it, its header alone longer than ``back``."""
    token = long_header_jwt(random.Random(SEED + back))
    assert len(token.split(".")[0]) > back
    message = window_filler(WINDOW_CHARS - back) + token + " was rejected; retry at noon"
    line = _written(kind, "%s", message)
    where = f"seed {SEED + back}, {kind}, back {back}"
    assert "[redacted " in line, where
    left = [piece for piece in _fragments(token) if piece in line]
    assert left == [], f"{where}: {len(left)} fragments of the token in the line"


def long_pem_key(rng: random.Random) -> str:
    """A PEM private key block with a 1,600-character base64 body in 64-character lines
    (a 2048-bit RSA key's size): its body runs far past its header."""
    body = base64.b64encode(bytes(rng.randrange(256) for _ in range(1200))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    body_lines = "\n".join(lines)
    return f"-----BEGIN RSA PRIVATE KEY-----\n{body_lines}\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("kind", LOG_FORMATS)
def test_long_private_key_body_is_redacted_whole(kind: LogFormat) -> None:
    """The whole body goes, not only the header and the first few lines."""
    key = long_pem_key(random.Random(SEED))
    line = _written(kind, "deploy failed with key %s; retry at noon", key)
    body = key.split("-----")[2]
    left = [piece for piece in _fragments(body) if piece in line]
    assert "[redacted " in line, f"seed {SEED}, {kind}"
    assert left == [], f"seed {SEED}, {kind}: {len(left)} fragments of the key body in the line"


@pytest.mark.parametrize("kind", LOG_FORMATS)
def test_value_holding_a_token_id_is_still_redacted(kind: LogFormat) -> None:
    """A token id (``tok_<16 hex>``) alone is written on purpose; a credential that merely
    begins with one (``api_key=tok_<hex><secret>``) is a credential, redacted whole."""
    rng = random.Random(SEED)
    token_id = "tok_" + "".join(rng.choice("0123456789abcdef") for _ in range(16))
    secret = _token(rng) + _token(rng)
    line = _written(kind, "retrying with api_key=%s", token_id + secret)
    assert secret not in line, f"seed {SEED}, {kind}"
    assert not [piece for piece in _fragments(secret) if piece in line], f"seed {SEED}, {kind}"


def base64url_phrases(rng: random.Random, count: int) -> list[str]:
    """``password=<value>`` in base64url whose encoding holds ``-`` or ``_`` (the two
    characters where base64url differs from base64): the URL-safe form of a pasted
    phrase, which a decoder that reads only the standard alphabet cannot open."""
    alphabet = string.ascii_letters + string.digits + "~?!"
    out: list[str] = []
    while len(out) < count:
        value = "".join(rng.choice(alphabet) for _ in range(12))
        encoded = base64.urlsafe_b64encode(f"password={value}".encode()).decode()
        if "-" in encoded or "_" in encoded:
            out.append(encoded)
    return out


@pytest.mark.parametrize("kind", LOG_FORMATS)
def test_base64url_phrase_is_redacted(kind: LogFormat) -> None:
    for encoded in base64url_phrases(random.Random(SEED), 4):
        line = _written(kind, "could not parse the note: %s", encoded)
        assert encoded.rstrip("=") not in line, f"seed {SEED}, {kind}"
