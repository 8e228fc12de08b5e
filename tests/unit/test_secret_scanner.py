"""The secret scanner: every planted credential is found, ordinary text passes, and no
finding or error ever carries the matched value."""

from __future__ import annotations

import base64

import pytest

from gates.checks.corpora import ENCODINGS, benign_corpus, credential_corpus
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import all_reasons
from scheduling.domain.secrets import (
    DETECTOR_KINDS,
    DETECTORS,
    SECRET_DETECTED,
    SecretFinding,
    SecretScanner,
    reject_secrets,
)
from scheduling.domain.secrets.detectors import FALLBACK_KINDS, VENDOR_KIND

SEED = 20261130
SCANNER = SecretScanner()
CORPUS = credential_corpus(SEED)
BENIGN = benign_corpus(SEED)


def _overlaps(finding: SecretFinding, span: tuple[int, int]) -> bool:
    return finding.start < span[1] and finding.end > span[0]


def test_corpus_is_large_and_covers_every_encoding_and_many_kinds() -> None:
    assert len(CORPUS) >= 300
    assert {case.encoding for case in CORPUS} == set(ENCODINGS)
    kinds = {case.kind for case in CORPUS}
    assert len(kinds) >= 25
    assert kinds <= DETECTOR_KINDS
    assert len({case.secret for case in CORPUS}) == len(CORPUS), "values repeat"


def test_corpus_is_deterministic_in_its_seed() -> None:
    again = credential_corpus(SEED)
    assert [c.instruction for c in again] == [c.instruction for c in CORPUS]
    other = credential_corpus(SEED + 1)
    assert [c.instruction for c in other] != [c.instruction for c in CORPUS]


def test_every_planted_credential_is_found_with_its_kind_at_its_place() -> None:
    missed: list[str] = []
    for case in CORPUS:
        findings = SCANNER.scan(case.instruction)
        if not any(f.kind == case.kind and _overlaps(f, case.span) for f in findings):
            missed.append(f"{case.case_id}: {[(f.kind, f.start, f.end) for f in findings]}")
    assert missed == [], f"seed={SEED}: {len(missed)} of {len(CORPUS)} missed: {missed[:10]}"


def test_the_corpus_check_fails_when_a_detector_is_missing() -> None:
    # The corpus assertion above can fail: without the GitHub row (and the entropy-only
    # fallback rows, which also catch a pasted token), GitHub cases are missed (only
    # assignment-shaped ones are still caught by the generic keyword rows).
    blind = SecretScanner(
        d
        for d in DETECTORS
        if d.kind not in {"github_token", VENDOR_KIND} and d.kind not in FALLBACK_KINDS
    )
    github = [case for case in CORPUS if case.kind == "github_token"]
    missed = [case for case in github if not blind.scan(case.instruction)]
    assert len(missed) >= len(github) // 2


def test_findings_in_credential_cases_stay_on_the_planted_value() -> None:
    # The instruction text around the credential must not add findings of its own.
    stray = [
        (case.case_id, f.kind)
        for case in CORPUS
        for f in SCANNER.scan(case.instruction)
        if not _overlaps(f, case.span)
    ]
    assert stray == []


def test_benign_corpus_is_fully_accepted() -> None:
    assert len(BENIGN) >= 300
    flagged = {text: SCANNER.scan(text) for text in BENIGN}
    flagged = {text: f for text, f in flagged.items() if f}
    assert flagged == {}


@pytest.mark.parametrize(
    "text",
    [
        "Summarize the news at 9am",
        "The password is stored in 1Password, ask Maria for access.",
        "Reset the password: click the link in the email.",
        "token: expires at 2026-01-01T09:00:00Z",
        "Bearer bonds were popular in the 1980s; write an essay.",
        "Authorization: pending manager approval",
        "session_id=123e4567-e89b-12d3-a456-426614174000",
        "https://www.example.com:8443/path/to/page?x=1&y=2#frag",
        "Use postgres://localhost:5432/analytics as the read replica.",
        "git@github.com:acme/widgets.git",
        "Check https://github.com/acme/widgets/commit/9fceb02d0ae598e95dc970b74767f19372d61af8",
        "Translate 'SGVsbG8gd29ybGQ=' from base64 and tell me what it says.",
        "Token budget: max_tokens=4096, temperature=0.2",
        "signature: Jane Doe, Head of Operations",
        "ＳＵＭＭＡＲＩＺＥ　ＴＨＥ　ＮＥＷＳ",  # noqa: RUF001 - fullwidth on purpose
        "export PATH=/usr/local/bin:$PATH",
        "Fix this loop:\n    for attempt in range(3):\n        pass\n    code = run(attempt)",
        "In pygments, Text = Token.Text\nWhitespace = Text.Whitespace; explain the hierarchy.",
        "Explain: session.exitstatus = ExitCode.OK\ninitstate = 0",
        "Why does password = unquote(password) appear in the URL parser?",
        "The password: see-vault, ask Maria.",
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    ],
)
def test_borderline_ordinary_text_passes(text: str) -> None:
    assert SCANNER.scan(text) == []


def _token(seed: int = 7) -> str:
    # Built at run time: no credential-shaped literal lives in the source.
    import random

    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "gh" + "p_" + "".join(rng.choice(alphabet) for _ in range(35)) + "7"


@pytest.mark.parametrize(
    ("name", "wrap", "transform"),
    [
        ("plain", lambda t: f"use {t} daily", ()),
        ("uppercase", lambda t: f"USE {t.upper()} DAILY", ()),
        ("zero_width", lambda t: "use " + "\u200b".join(t) + " daily", ("normalized", "joined")),
        ("line_wrapped", lambda t: f"use {t[:12]}\n    {t[12:]} daily", ("unwrapped",)),
        (
            "double_percent",
            lambda t: "see https://x.example/?t=" + "".join(f"%25{ord(c):02X}" for c in t),
            ("percent", "percent"),
        ),
        (
            "base64_in_base64",
            lambda t: "cfg " + base64.b64encode(base64.b64encode(t.encode())).decode(),
            ("base64", "base64"),
        ),
    ],
)
def test_encodings_are_undone_and_named(name: str, wrap, transform: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    findings = SCANNER.scan(wrap(_token()))
    assert any(f.kind == "github_token" and f.transforms == transform for f in findings), (
        name,
        findings,
    )


def test_span_points_at_the_original_characters() -> None:
    token = _token()
    hidden = "\u200b".join(token)
    text = f"use {hidden} daily"
    (finding,) = SCANNER.scan(text)
    assert (finding.start, finding.end) == (4, 4 + len(hidden))
    assert text[finding.start : finding.end] == hidden


def test_findings_and_errors_never_carry_the_value() -> None:
    checked = 0
    for case in CORPUS:
        findings = SCANNER.scan(case.instruction)
        shown = repr(findings) + str(findings) + "".join(str(f) for f in findings)
        with pytest.raises(ValidationError) as caught:
            reject_secrets("instruction", case.instruction)
        error = caught.value
        surfaces = [
            shown,
            str(error),
            repr(error),
            error.message,
            repr(error.details),
            repr(error.args),
        ]
        for needle in case.needles:
            for fragment in {needle, needle[:12], needle[-12:]}:
                if len(fragment) < 8:
                    continue
                for surface in surfaces:
                    assert fragment not in surface, case.case_id
                    checked += 1
    assert checked > len(CORPUS)


def test_reject_secrets_names_field_and_kinds_only() -> None:
    token = _token()
    with pytest.raises(ValidationError) as caught:
        reject_secrets("title", f"nightly sync with {token}")
    error = caught.value
    assert error.code == SECRET_DETECTED == "schedule.secret_detected"
    assert error.details == {"field": "title", "kinds": ["github_token"]}
    assert "title" in error.message
    assert "github_token" in error.message
    assert SECRET_DETECTED in all_reasons()


def test_reject_secrets_accepts_ordinary_text() -> None:
    for text in BENIGN[:50]:
        reject_secrets("instruction", text)  # raises on a false positive
    assert SCANNER.scan(BENIGN[0]) == []


def test_finding_has_no_value_field() -> None:
    fields = set(SecretFinding.__dataclass_fields__)
    assert fields == {"kind", "start", "end", "transforms"}


def test_a_credential_far_into_a_long_instruction_is_still_found() -> None:
    token = _token()
    for prefix in (0, 16_000, 16_383, 100_000, 1_000_003):
        text = "x " * (prefix // 2) + token + " tail"
        findings = SCANNER.scan(text)
        assert [(f.kind, f.start) for f in findings] == [
            ("github_token", len(text) - len(token) - 5)
        ]


@pytest.mark.parametrize(
    ("value", "random_looking"),
    [
        ("management-2024-report", False),
        ("Q3-2026-revenue-report", False),
        ("Token.Name.Builtin.SchemeFunction", False),
        ("context.perl6_token_nesting_level", False),
        ("HTTPBasicAuthHandler", False),
        ("2026-01-01T09:00:00Z", False),
        ("aBcDeFgHiJkLmNoP", True),
        ("8f3Ab9Xz1Qw7Lm2N", True),
        ("123e4567-e89b-12d3-a456-426614174000", True),
    ],
)
def test_looks_random_separates_words_and_code_from_tokens(
    value: str, random_looking: bool
) -> None:
    from scheduling.domain.secrets.predicates import looks_random

    assert looks_random(value) is random_looking


@pytest.mark.parametrize(
    ("value", "explicit", "password"),
    [
        ("hunter2", False, True),
        ("Tr0ub4dor&3", False, True),
        ("see-vault", False, False),
        ("Summer", False, False),
        ("remind", False, False),
        ("correcthorse", True, True),
        ("unquote(password)", True, False),
        ("cfg.password", True, False),
        ("${DB_PASSWORD}", True, False),
        ("$DB_PASS", True, False),
        ("$Of3roTkn_RYRJ", True, True),
        ("<password>", True, False),
    ],
)
def test_password_values(value: str, explicit: bool, password: bool) -> None:
    from scheduling.domain.secrets.predicates import looks_like_password

    assert looks_like_password(value, explicit_assignment=explicit) is password
