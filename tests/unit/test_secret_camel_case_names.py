"""Camel-case names are names, not opaque tokens; random runs of the token alphabet
still are (``predicates.camel_case_name``, ADR 2752 eleventh session)."""

from __future__ import annotations

import random
import string

import pytest

from scheduling.domain.secrets import SecretScanner
from scheduling.domain.secrets.predicates import camel_case_name, looks_like_token

SCANNER = SecretScanner()
SEED = 20261207
NAMES = (
    "PaymentGatewayClientTest",
    "InvoiceRendererV2Test",
    "QuarterlyRevenueReport2026",
    "AbstractSingletonProxyFactoryBean",
    "getUserProfileSettingsValue",
)


@pytest.mark.parametrize("name", NAMES)
def test_a_camel_case_name_is_not_a_token(name: str) -> None:
    assert camel_case_name(name)
    assert not looks_like_token(name)
    assert SCANNER.scan(f"Summarize the failures in {name} every morning.") == []


@pytest.mark.parametrize(
    "run",
    [
        "PaymentGatewayClntTst",  # a hump without a vowel
        "Payment7GatewayClient",  # digits inside, not at the end
        "paymentgatewayclienttest",  # one lower-case word, no humps
        "PaymentGatewayClientTest20261",  # five digits at the end
        "PaGaClTeReInVoQuRe",  # humps of two letters
    ],
)
def test_a_run_that_is_not_cut_into_words_is_no_name(run: str) -> None:
    assert not camel_case_name(run)


def test_random_runs_of_the_token_alphabet_stay_tokens() -> None:
    """Of 100,000 seeded random runs of 20-40 characters, almost none reads as a name
    (about 2 in a million): the rule cannot hide random tokens wholesale."""
    rng = random.Random(SEED)
    alphabet = string.ascii_letters + string.digits
    names = []
    for _ in range(100_000):
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(20, 40)))
        if camel_case_name(run):
            names.append(run)
    assert len(names) <= 2, f"seed {SEED}: {names}"
