"""Vendor shapes by structure, and base64 prose (issue 23 finding 4, ADR 2131).

* The Contentful personal access token (``CFPAT-`` and 43 base64url characters,
  trufflehog's detector) is refused, random or patterned.
* Every vendor-specific public rule (its secret starts with a literal prefix) has
  low-entropy instances in the corpus (``vendor_cases``' ``:low<period>`` cases:
  ``ghp_AAAA...``, ``npm_abcdabcd...``); each is refused, and the test of the test
  shows that only the vendor table catches them (the entropy rows do not).
* Base64 of plain English after a keyword is not a secret (``keyed_high_entropy``
  decodes it first); base64 of a credential still is (the decoded view).
"""

from __future__ import annotations

import base64

import pytest

from gates.checks.corpora import benign_corpus
from gates.checks.corpora.public_formats import BENIGN, vendor_cases
from gates.checks.test_no_credentials_public import CORPUS_SEED
from scheduling.domain.secrets import DETECTORS, SecretScanner
from scheduling.domain.secrets.detectors import FALLBACK_KINDS, VENDOR_KIND

SCANNER = SecretScanner()
CASES, _ = vendor_cases(CORPUS_SEED)
LOW = [case for case in CASES if ":low" in case.case_id]
CFPAT_BODY = "i_eQd5zEsppjxXM4h4DpgAOErAM6kwbXkDi0X-WA40Y"


@pytest.mark.parametrize(
    "token",
    [
        "CFPAT-" + CFPAT_BODY,
        "CFPAT-" + "A" * 43,
        "CFPAT-" + "abcd" * 10 + "abc",
        "CFPAT-" + "0123456789-_" * 3 + "0123456",
    ],
    ids=["real-shape", "repeated", "cycled", "digits"],
)
def test_the_contentful_personal_access_token_is_refused(token: str) -> None:
    findings = SCANNER.scan(f"Sync the space nightly with {token} and report errors.")
    assert [f.kind for f in findings] == [VENDOR_KIND]


@pytest.mark.parametrize(
    "token",
    [
        "ghp_" + "A" * 36,
        "ghp_" + "abcd" * 9,
        "npm_" + "a" * 36,
        "glpat-" + "x1" * 10,
        "xoxb-" + "1111-" * 3 + "aaaa",
        "sk_live_" + "0" * 24,
        "AKIA" + "A" * 16,
        "AIza" + "B" * 35,
        "hf_" + "a" * 34,
        "dop_v1_" + "0" * 64,
        "shpat_" + "a" * 32,
        "pypi-AgEIcHlwaS5vcmc" + "A" * 50,
    ],
)
def test_low_entropy_bodies_of_vendor_shapes_are_refused(token: str) -> None:
    assert SCANNER.scan(f"use {token} for the export"), token


def test_every_low_entropy_case_of_the_public_corpus_is_refused() -> None:
    prefixed = {case.case_id.rsplit(":", 1)[0] for case in LOW}
    assert len(LOW) >= 200
    assert len(prefixed) >= 100
    missed = [case.case_id for case in LOW if not SCANNER.scan(case.instruction)]
    assert missed == [], f"seed {CORPUS_SEED}: {missed}"


def test_of_the_test_only_the_vendor_table_catches_the_low_entropy_cases() -> None:
    # Without the table (every named row and both entropy fallbacks still there),
    # most low-entropy cases pass: the cases test vendor shapes, not entropy.
    without = SecretScanner(d for d in DETECTORS if d.kind != VENDOR_KIND)
    missed = [case for case in LOW if not without.scan(case.instruction)]
    assert len(missed) > len(LOW) // 2
    entropy_only = SecretScanner(d for d in DETECTORS if d.kind in FALLBACK_KINDS)
    assert sum(not entropy_only.scan(case.instruction) for case in LOW) > len(LOW) * 3 // 4


PROSE = (
    "The quick brown fox jumps over the lazy dog",
    "Please summarize the weekly report for me.",
    "hello world again and again",
    "Remember to water the plants on Friday",
)


@pytest.mark.parametrize("text", PROSE)
@pytest.mark.parametrize(
    "context", ["note: {v}", "payload={v}", "message := '{v}'", "body => {v}", 'greeting: "{v}"']
)
def test_base64_of_plain_english_after_a_keyword_is_not_a_secret(context: str, text: str) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        value = encode(text.encode()).decode()
        assert SCANNER.scan(context.format(v=value)) == [], (context, text)


def test_base64_of_a_credential_after_a_keyword_is_still_found() -> None:
    for secret in (
        "password=Tr0ub4dor&3xK9",
        "api_key: 8f3Ak2Lm9Xv4Np8Ws3Bt6Yd1Hc5Jf0Ga",
        "ghp_" + "Zq7Rk2Lm9Xv4Np8Ws3Bt6Yd1Hc5Jf0Ga2Ue",
    ):
        value = base64.b64encode(secret.encode()).decode()
        assert SCANNER.scan(f"note: {value}"), secret
    # Random bytes are no prose: still a keyed high-entropy value.
    noise = base64.b64encode(bytes(range(7, 250, 9))).decode()
    assert SCANNER.scan(f"note: {noise}")


def test_the_vendor_table_adds_no_false_positive() -> None:
    texts = list(BENIGN) + benign_corpus(CORPUS_SEED)
    flagged = [t for t in texts if SCANNER.scan(t)]
    assert len(texts) >= 300
    assert flagged == []
