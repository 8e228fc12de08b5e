"""The credential-shaped instruction corpus for ``gate.schedule.no_credentials``.

Each case embeds one synthetic credential (see ``fakes``) in realistic instruction
text, in one of several encodings, and records what a leak check must look for:
``needles`` are the raw value and every form of it that appears in the text. A gate
check submits ``case.instruction`` through the service, expects the rejection, then
asserts no needle occurs in the database or in captured logs.
"""

from __future__ import annotations

import base64
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from gates.checks.corpora.fakes import FakeCredentials
from scheduling.domain.revision import MAX_INSTRUCTION
from scheduling.domain.secrets import WINDOW_CHARS

DEFAULT_SEED = 20261130

ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
ODD_SPACES = ("\u00a0", "\u2009", "\u200a", "\u202f", "\u3000", "\u2007")

BASE_ENCODINGS = (
    "plain",
    "percent",
    "base64",
    "base64url",
    "double_base64",
    "percent_base64",
    "zero_width",
    "odd_whitespace",
    "fullwidth",
    "uppercase",
    "line_wrapped",
)
EXTRA_ENCODINGS = (
    "combining",
    "percent_lowercase",
    "double_percent",
    "odd_separator",
    "window_edge",
)
"""Drawn after the base cases from their own generator, so the base cases stay as they
were: combining marks inside the value (removed like zero-width characters), the
phrase percent-encoded with lower-case hex (RFC 3986 makes ``%3a`` and ``%3A`` the
same) or twice (``%253A``, a URL inside a URL parameter), its spaces pasted as odd
whitespace (NBSP, thin space...: ``my password is<NBSP>...``), and the value astride
the scanner's window boundary in a long instruction (``window_edge``)."""
ENCODINGS = BASE_ENCODINGS + EXTRA_ENCODINGS
COMBINING = ("\u0301", "\u0308", "\u0323", "\u0336", "\u20dd")
"""Combining marks (Mn, and the enclosing circle, Me) a value can be strewn with."""


@dataclass(frozen=True)
class CredentialCase:
    """One credential-shaped instruction and what its planted secret looks like."""

    case_id: str
    kind: str
    """The recipe's credential kind (also the scanner kind expected in most cases)."""
    encoding: str
    instruction: str
    secret: str
    """The raw synthetic credential value."""
    embedded: str
    """The exact substring of ``instruction`` that carries the credential."""
    span: tuple[int, int]
    """Where ``embedded`` sits in ``instruction``."""
    expected_kinds: frozenset[str]
    """Scanner kinds that correctly describe this case."""
    needles: tuple[str, ...]
    """Strings that must never reach the database or the logs."""

    def __repr__(self) -> str:  # keep planted values out of test reports by default
        return f"CredentialCase({self.case_id!r}, kind={self.kind!r}, encoding={self.encoding!r})"


@dataclass(frozen=True)
class _Recipe:
    kind: str
    make: Callable[[FakeCredentials], tuple[str, str]]
    """Returns (secret value, phrase containing it exactly once)."""
    uses: tuple[str, ...]
    """Instruction fragments with a ``{c}`` slot for the (encoded) phrase."""
    also: frozenset[str] = frozenset()
    skip: frozenset[str] = frozenset()
    label: str = ""
    """The case id's first part when two recipes share a kind (default: the kind)."""


def _plain(make: Callable[[FakeCredentials], str]) -> Callable[[FakeCredentials], tuple[str, str]]:
    def build(fake: FakeCredentials) -> tuple[str, str]:
        value = make(fake)
        return value, value

    return build


def _phrase(
    make: Callable[[FakeCredentials], str], *phrases: str
) -> Callable[[FakeCredentials], tuple[str, str]]:
    def build(fake: FakeCredentials) -> tuple[str, str]:
        value = make(fake)
        return value, fake.rng.choice(phrases).replace("{v}", value)

    return build


_ASSIGN = frozenset({"generic_api_key_assignment", "high_entropy_assignment"})
# The encodings that put a line break inside the value. Skipped by the kinds recognized
# by a keyword or structure around the value on the same line: the scanner does not glue
# lines for them (a value joined to the next line's first word would be prose), so a
# break inside their value is not a case it claims to find.
_LINE_BREAKS = frozenset({"line_wrapped"})

_RECIPES: tuple[_Recipe, ...] = (
    _Recipe(
        "aws_access_key",
        _phrase(lambda f: f.aws_access_key(), "{v}", "AWS_ACCESS_KEY_ID={v}", "access key id {v}"),
        ("pull the S3 cost report with access key {c}", "sync s3://acme-reports using {c}"),
        also=_ASSIGN,
    ),
    _Recipe(
        "aws_secret_key",
        _phrase(
            lambda f: f.aws_secret_key(),
            "aws_secret_access_key = {v}",
            "AWS_SECRET_ACCESS_KEY={v}",
            '"awsSecretKey": "{v}"',
        ),
        ("export the billing data with {c}", "use these settings for the S3 backup: {c}"),
        also=_ASSIGN,
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "google_api_key",
        _phrase(
            lambda f: f.google_api_key(),
            "{v}",
            "https://maps.googleapis.com/maps/api/geocode/json?address=Berlin&key={v}",
        ),
        ("fetch the traffic forecast from {c}", "geocode the new store addresses with {c}"),
        also=_ASSIGN,
    ),
    _Recipe(
        "google_oauth_token",
        _plain(lambda f: f.google_oauth_token()),
        ("read my Gmail inbox with the access token {c}", "call the Drive API using {c}"),
        also=_ASSIGN | {"bearer_token"},
    ),
    _Recipe(
        "gcp_service_account_key",
        _phrase(
            lambda f: f.hex(40),
            '{"type": "service_account", "project_id": "acme-prod", "private_key_id": "{v}", '
            '"client_email": "bot@acme-prod.iam.gserviceaccount.com"}',
        ),
        ("query BigQuery with this service account: {c}",),
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "azure_storage_key",
        _phrase(
            lambda f: f.azure_storage_key(),
            "DefaultEndpointsProtocol=https;AccountName=acmedata;AccountKey={v};"
            "EndpointSuffix=core.windows.net",
        ),
        ("back up the reports container using {c}",),
        also=_ASSIGN,
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "azure_sas_token",
        _phrase(
            lambda f: f.azure_sas_signature(),
            "https://acmedata.blob.core.windows.net/reports/q3.csv?sv=2022-11-02&ss=b&srt=o"
            "&sp=r&se=2026-12-31T00:00:00Z&spr=https&sig={v}",
        ),
        ("download {c} and chart the totals",),
        also=_ASSIGN,
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "azure_client_secret",
        _phrase(lambda f: f.azure_client_secret(), "{v}", "AZURE_CLIENT_SECRET={v}"),
        ("sign in to the Graph API with client secret {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "digitalocean_token",
        _plain(lambda f: f.digitalocean_token()),
        ("list my droplets with {c} and flag idle ones",),
        also=_ASSIGN,
    ),
    _Recipe(
        "github_token",
        _phrase(lambda f: f.github_token(), "{v}", "GITHUB_TOKEN={v}", "token {v}"),
        (
            "check new issues in acme/widgets using {c}",
            "open a PR summary for acme/api, authenticate with {c}",
        ),
        also=_ASSIGN,
    ),
    _Recipe(
        "gitlab_token",
        _plain(lambda f: f.gitlab_token()),
        ("list failed pipelines on gitlab.com/acme/app with {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "npm_token",
        _phrase(lambda f: f.npm_token(), "{v}", "//registry.npmjs.org/:_authToken={v}"),
        ("check download stats for @acme/ui using {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "pypi_token",
        _plain(lambda f: f.pypi_token()),
        ("publish the nightly wheel with {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "slack_token",
        _plain(lambda f: f.slack_token()),
        ("post the digest to #general using {c}", "read unread Slack DMs with {c}"),
        also=_ASSIGN,
    ),
    _Recipe(
        "slack_webhook",
        _plain(lambda f: f.slack_webhook()),
        ("send the summary to {c}",),
    ),
    _Recipe(
        "stripe_key",
        _phrase(lambda f: f.stripe_key(), "{v}", "STRIPE_SECRET_KEY={v}"),
        ("total yesterday's Stripe charges using {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "sendgrid_key",
        _plain(lambda f: f.sendgrid_key()),
        ("email the report through SendGrid with {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "mailgun_key",
        _plain(lambda f: f.mailgun_key()),
        ("send the newsletter via Mailgun, api key {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "shopify_token",
        _plain(lambda f: f.shopify_token()),
        ("export today's Shopify orders with {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "huggingface_token",
        _plain(lambda f: f.huggingface_token()),
        ("check the model downloads on Hugging Face using {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "anthropic_key",
        _phrase(lambda f: f.anthropic_key(), "{v}", "ANTHROPIC_API_KEY={v}"),
        ("summarize the tickets with Claude, key {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "openai_key",
        _phrase(lambda f: f.openai_key(), "{v}", "OPENAI_API_KEY={v}"),
        ("translate the changelog using the OpenAI API with {c}",),
        also=_ASSIGN,
    ),
    _Recipe(
        "jwt",
        _plain(lambda f: f.jwt()),
        ("call the reporting API with the JWT {c}", "refresh the dashboard, session token {c}"),
        also=_ASSIGN | {"bearer_token"},
    ),
    _Recipe(
        "private_key_block",
        _plain(lambda f: f.private_key_block()),
        (
            "ssh into the build host with this key:\n{c}\nand restart the runner",
            "sign the release notes with\n{c}",
        ),
    ),
    _Recipe(
        "bearer_token",
        _phrase(
            lambda f: f.opaque_token(),
            "Authorization: Bearer {v}",
            "-H 'Authorization: Bearer {v}'",
            "Authorization: Bearer\t{v}",
            "Authorization:  Bearer   {v}",
        ),
        ("call https://api.example.com/v1/reports with {c}", "curl the metrics endpoint {c}"),
        also=_ASSIGN | {"authorization_header"},
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "basic_auth_header",
        _phrase(lambda f: f.basic_credentials(), "Authorization: Basic {v}"),
        ("poll the legacy status page with {c}",),
        skip=frozenset({"uppercase"}) | _LINE_BREAKS,
    ),
    _Recipe(
        "password_in_url",
        _phrase(
            lambda f: f.password(),
            "postgres://report_user:{v}@db.internal.example:5432/analytics",
            "https://alice:{v}@intranet.example.com/feed.xml",
            "ftp://backup:{v}@files.example.org/nightly/",
        ),
        ("connect to {c} and count yesterday's signups", "download {c} every night"),
        also=frozenset({"password_assignment"}),
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "password_assignment",
        _phrase(
            lambda f: f.password(),
            "password={v}",
            "DB_PASSWORD: {v}",
            "my password is {v}",
            "username alice, password: {v}",
        ),
        ("log in to the vendor portal ({c}) and download the invoice",),
        also=_ASSIGN,
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "password_assignment",
        _phrase(
            lambda f: f.short_password(),
            "password={v}",
            "pass={v}",
            "pwd={v}",
            "passwd => {v}",
            "the wifi password is {v}",
        ),
        ("sign in to the router admin page ({c}) and reboot it",),
        skip=_LINE_BREAKS,
        label="password_short",
    ),
    _Recipe(
        "password_assignment",
        _phrase(lambda f: f.dollar_password(), "password={v}", "DB_PASSWORD: {v}"),
        ("log in to the staging database with {c}",),
        # Upper-cased, ``$NAME`` is how an environment variable is referenced.
        skip=frozenset({"uppercase"}) | _LINE_BREAKS,
        label="password_dollar",
    ),
    _Recipe(
        "password_in_url",
        _phrase(
            lambda f: f.url_password(),
            "postgres://app:{v}@db.internal.example:5432/analytics",
            "https://bob:{v}@intranet.example.com/feed.xml",
        ),
        ("connect to {c} and count yesterday's signups",),
        skip=_LINE_BREAKS,
        label="password_in_url_short",
    ),
    _Recipe(
        "authorization_header",
        _phrase(
            lambda f: f.opaque_token(32),
            "Proxy-Authorization: {v}",
            "-H 'Proxy-Authorization: {v}'",
        ),
        ("fetch the partner feed through the corporate proxy with {c}",),
        skip=_LINE_BREAKS,
        label="proxy_authorization",
    ),
    _Recipe(
        "session_cookie",
        _phrase(
            lambda f: f.session_value(),
            "Cookie: sessionid={v}",
            "Set-Cookie: __Secure-next-auth.session-token={v}; Path=/; HttpOnly; Secure",
            "session_id={v}",
        ),
        ("open the admin dashboard with {c} and screenshot the KPIs",),
        also=_ASSIGN,
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "generic_api_key_assignment",
        _phrase(
            lambda f: f.opaque_token(32),
            "X_API_KEY={v}",
            '"apiKey": "{v}"',
            "api-key: {v}",
            "client_secret={v}",
        ),
        ("query the weather service with {c}",),
        also=frozenset({"high_entropy_assignment"}),
        skip=_LINE_BREAKS,
    ),
    _Recipe(
        "high_entropy_assignment",
        _phrase(
            lambda f: f.opaque_token(40),
            "webhook_secret: {v}",
            "the signing token is {v}",
            "signature={v}",
        ),
        ("verify the payment webhooks with {c}",),
        also=frozenset({"generic_api_key_assignment"}),
        skip=_LINE_BREAKS,
    ),
    # Appended (after every earlier recipe, so their draws are unchanged).
    _Recipe(
        "password_in_url",
        _phrase(
            lambda f: f.password(),
            "redis://:{v}@cache.internal.example:6379/0",
            "rediss://:{v}@redis.example.net:6380",
        ),
        # Redis AUTH with a password and no user: the userinfo is empty before the colon.
        ("connect to {c} and report the memory usage",),
        skip=_LINE_BREAKS,
        label="password_in_url_no_user",
    ),
    _Recipe(
        "basic_auth_header",
        _phrase(
            lambda f: f.short_basic_credentials(),
            "Authorization: Basic {v}",
            "-H 'Authorization: Basic {v}'",
        ),
        ("poll the legacy status page with {c}",),
        skip=frozenset({"uppercase"}) | _LINE_BREAKS,
        label="basic_auth_short",
    ),
    _Recipe(
        "password_assignment",
        _phrase(
            lambda f: f.wordy_password(),
            "my password is {v}",
            "password: {v}",
            "the wifi password is {v}",
        ),
        ("log in to the vendor portal ({c}) and download the invoice",),
        skip=_LINE_BREAKS,
        label="password_no_digit",
    ),
    _Recipe(
        "high_entropy_assignment",
        _phrase(
            lambda f: f.short_token(),
            "my API token is {v}",
            "the access token is {v}",
            "the webhook secret is {v}",
        ),
        ("call the partner API and summarize the result; {c}",),
        also=frozenset({"generic_api_key_assignment"}),
        skip=_LINE_BREAKS,
        label="short_token_in_prose",
    ),
)

_FRAMES = (
    "Every weekday at 9am, {use} and send me a short summary.",
    "Tomorrow at 18:00 {use}, then post the result to #ops.",
    "Each Monday morning: {use}. Keep the report under 200 words.",
    "At 07:30 every day {use}; if anything failed, tell me first.",
    "Once a month {use} and compare the numbers with last month.",
    "Please {use}. Do this every day at noon, Europe/Berlin time.",
    "On the first of each month {use}, then draft an email to finance.",
    "Remind me on Friday at 4pm, and {use} before that.",
)


def _percent(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c.isascii() else quote(c) for c in value)


def _insert(rng: random.Random, value: str, chars: tuple[str, ...], count: int) -> str:
    out = list(value)
    for _ in range(count):
        out.insert(rng.randint(1, max(1, len(out) - 1)), rng.choice(chars))
    return "".join(out)


def _fullwidth(value: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value)


def _encode(
    rng: random.Random, encoding: str, secret: str, phrase: str
) -> tuple[str, tuple[str, ...]]:
    """The text to embed and the extra needles (encoded forms of the secret)."""
    b64 = base64.b64encode(phrase.encode()).decode()
    if encoding == "plain" or encoding == "uppercase":
        return phrase, ()
    if encoding == "percent":
        encoded = _percent(secret)
        return phrase.replace(secret, encoded), (encoded,)
    if encoding == "base64":
        return b64, (b64,)
    if encoding == "base64url":
        encoded = base64.urlsafe_b64encode(phrase.encode()).decode().rstrip("=")
        return encoded, (encoded,)
    if encoding == "double_base64":
        encoded = base64.b64encode(b64.encode()).decode()
        return encoded, (encoded, b64)
    if encoding == "percent_base64":
        encoded = quote(b64, safe="")
        return encoded, (encoded, b64)
    if encoding == "zero_width":
        encoded = _insert(rng, secret, ZERO_WIDTH, rng.randint(2, 4))
        return phrase.replace(secret, encoded), (encoded,)
    if encoding == "odd_whitespace":
        encoded = _insert(rng, secret, ODD_SPACES, rng.randint(1, 3))
        return phrase.replace(secret, encoded), (encoded,)
    if encoding == "fullwidth":
        encoded = _fullwidth(secret)
        return phrase.replace(secret, encoded), (encoded,)
    if encoding == "line_wrapped":
        # A long value pasted from a wrapped terminal or email: broken mid-value, the
        # continuation sometimes indented.
        at = rng.randint(4, len(secret) - 4)
        encoded = secret[:at] + rng.choice(("\n", "\r\n", "\n  ")) + secret[at:]
        return phrase.replace(secret, encoded), (encoded,)
    raise ValueError(f"unknown encoding {encoding!r}")


def _wrap(encoding: str, use: str, embedded: str, neutral: bool) -> str:
    if encoding in ("base64", "base64url", "double_base64"):
        # Half the encoded cases carry no credential word around the blob, so only
        # decoding it can find the credential inside (a scanner that stops decoding
        # must fail them); the other half say what the blob is.
        wrapper = (
            "summarise {c} for the team" if neutral else "decode this base64 config and use it: {c}"
        )
        return wrapper.replace("{c}", embedded)
    if encoding == "percent_base64":
        return "open https://example.com/run?config={c}".replace("{c}", embedded)
    return use.replace("{c}", embedded)


def credential_corpus(seed: int = DEFAULT_SEED, repeats: int = 2) -> list[CredentialCase]:
    """Every recipe x every applicable encoding, ``repeats`` times: several hundred cases.

    Deterministic in ``seed``; values are synthetic and differ per case.
    """
    rng = random.Random(seed)
    fake = FakeCredentials(rng)
    cases: list[CredentialCase] = []
    for recipe in _RECIPES:
        for encoding in BASE_ENCODINGS:
            if encoding in recipe.skip:
                continue
            for n in range(repeats):
                secret, phrase = recipe.make(fake)
                embedded, extra = _encode(rng, encoding, secret, phrase)
                use = _wrap(encoding, rng.choice(recipe.uses), embedded, neutral=n % 2 == 1)
                frame = rng.choice(_FRAMES)
                before, _, after = frame.partition("{use}")
                use_before, _, use_after = use.partition(embedded)
                instruction = before + use_before + embedded + use_after + after
                start = len(before) + len(use_before)
                needles: tuple[str, ...] = (secret, embedded, *extra)
                if encoding == "uppercase":
                    instruction = instruction.upper()
                    embedded = embedded.upper()
                    needles = (*needles, secret.upper(), embedded)
                span = (start, start + len(embedded))
                assert instruction[span[0] : span[1]] == embedded
                cases.append(
                    CredentialCase(
                        case_id=f"{recipe.label or recipe.kind}/{encoding}/{n}",
                        kind=recipe.kind,
                        encoding=encoding,
                        instruction=instruction,
                        secret=secret,
                        embedded=embedded,
                        span=span,
                        expected_kinds=frozenset({recipe.kind}) | recipe.also,
                        needles=tuple(dict.fromkeys(needles)),
                    )
                )
    return cases + _extra_cases(seed, repeats)


def _percent_phrase(phrase: str, rounds: int, lower: bool) -> str:
    """``phrase`` as a URL parameter value: reserved characters percent-encoded
    ``rounds`` times, the hex digits in lower case when ``lower``."""
    for _ in range(rounds):
        phrase = quote(phrase, safe="")
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), phrase) if lower else phrase


def window_filler(length: int) -> str:
    """Ordinary prose of exactly ``length`` characters ending in a space: the long
    benign head of a ``window_edge`` case (and, alone, a benign control)."""
    text = ""
    while len(text) < length:
        text += " ".join(_FILLER) + " "
    return text[: length - 1] + " "


_FILLER = (
    "Read the overnight incident channel and list anything still open.",
    "Compare this week's signups with last week's and note the biggest change.",
    "Check the release calendar and remind the team about Thursday's freeze.",
    "Summarize customer feedback from the support inbox in five bullet points.",
    "Keep it short, friendly and in plain language for the whole team.",
)


def _extra_cases(seed: int, repeats: int) -> list[CredentialCase]:
    """Every recipe in every ``EXTRA_ENCODINGS`` encoding, from a generator of its own."""
    rng = random.Random(seed + 1)
    fake = FakeCredentials(rng)
    cases: list[CredentialCase] = []
    for recipe in _RECIPES:
        for encoding in EXTRA_ENCODINGS:
            for n in range(repeats):
                secret, phrase = recipe.make(fake)
                use = rng.choice(recipe.uses)
                before, _, after = rng.choice(_FRAMES).partition("{use}")
                needles: tuple[str, ...] = (secret,)
                if encoding == "combining":
                    value = _insert(rng, secret, COMBINING, rng.randint(2, 4))
                    embedded = phrase.replace(secret, value)
                    needles += (value,)
                elif encoding in ("percent_lowercase", "double_percent"):
                    double = encoding == "double_percent"
                    embedded = _percent_phrase(phrase, 2 if double else 1, lower=not double)
                    use = "open https://example.com/run?config={c}"
                    needles += (embedded,)
                elif encoding == "odd_separator":
                    space = rng.choice(ODD_SPACES)
                    embedded = phrase.replace(" ", space)
                    needles += (embedded,)
                else:  # window_edge
                    embedded = phrase
                    use_before, _, use_after = use.partition("{c}")
                    # The value straddles the first window's end, its keyword before it.
                    at = WINDOW_CHARS - rng.randint(1, len(secret) - 1)
                    head = len(before) + len(use_before) + phrase.index(secret)
                    before = before + window_filler(at - head)
                    use = use_before + "{c}" + use_after
                use_before, _, use_after = use.partition("{c}")
                instruction = before + use_before + embedded + use_after + after
                start = len(before) + len(use_before)
                if encoding == "window_edge":
                    if len(instruction) > MAX_INSTRUCTION:
                        raise ValueError("a window_edge case is longer than an instruction")
                    if instruction[at : at + len(secret)] != secret:
                        raise ValueError("a window_edge value is not at the window's end")
                cases.append(
                    CredentialCase(
                        case_id=f"{recipe.label or recipe.kind}/{encoding}/{n}",
                        kind=recipe.kind,
                        encoding=encoding,
                        instruction=instruction,
                        secret=secret,
                        embedded=embedded,
                        span=(start, start + len(embedded)),
                        expected_kinds=frozenset({recipe.kind}) | recipe.also,
                        needles=tuple(dict.fromkeys(needles)),
                    )
                )
    return cases
