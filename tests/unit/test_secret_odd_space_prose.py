"""Prose typed with odd spaces between its words is not a token; a token split by odd
spaces still is (the view that removes odd whitespace glues both into one run)."""

from __future__ import annotations

import random

import pytest

from scheduling.domain.secrets.predicates import prose_words
from scheduling.domain.secrets.scanner import SecretScanner
from scheduling.domain.secrets.views import odd_space_pieces

ODD = ("\u00a0", "\u202f", "\u2009", "\u3000")
SCANNER = SecretScanner()


@pytest.mark.parametrize("space", ODD)
def test_prose_typed_with_odd_spaces_is_accepted(space: str) -> None:
    text = "Please summarize the weekly sales report for the Finance team in 2026"
    assert SCANNER.scan(text.replace(" ", space)) == []


@pytest.mark.parametrize("space", ODD)
def test_a_token_split_by_odd_spaces_is_still_found(space: str) -> None:
    seed = 2026
    rng = random.Random(seed)
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
    for _ in range(200):
        token = "".join(rng.choice(alphabet) for _ in range(32))
        cuts = sorted(rng.sample(range(4, 28), 2))
        split = token[: cuts[0]] + space + token[cuts[0] : cuts[1]] + space + token[cuts[1] :]
        found = SCANNER.scan(f"deploy with {split} tonight")
        assert found, f"seed {seed}: {split!r} not found"


def test_pieces_and_words() -> None:
    assert odd_space_pieces("a\u00a0\u00a0b\u202fc") == ["a", "b", "c"]
    assert prose_words(["Summarize", "Q3", "PDF", "2026."])
    assert not prose_words(["Summarize"])  # one piece: nothing was glued
    assert not prose_words(["aB3xKq", "ZrT5"])  # mixed case, digits inside
    assert not prose_words(["qzkxvbwp", "mrtl"])  # letters with no vowel
