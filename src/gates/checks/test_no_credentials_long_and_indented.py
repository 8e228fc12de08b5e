"""gate.schedule.no_credentials, on two shapes the corpora do not draw: a credential deep
inside a long base64 blob, and a token wrapped onto lines indented by more than two
blanks.

* **Long base64.** The scanner decodes a long base64 run in aligned pieces of 4,096
  characters that overlap by 1,024, so a credential of up to 768 decoded bytes lies
  whole inside some piece wherever it sits. The cases: a 7,200-character blob (5,400
  bytes of prose with ``db password: <value>`` in it, no newline, so nothing about
  the blob itself looks like a token) with the value across the first piece's end
  (decoded byte 3,072), and one with it at byte 4,500, past the first piece.
  Pieces that do not overlap split the first value (``views.base64_pieces_do_not_overlap``);
  decoding only the first piece misses the second (``views.only_first_base64_piece``).
* **Deep indents.** A GitHub token wrapped over three lines, each continuation indented
  by four or eight spaces (pasted from an email's quoted block or a YAML value), with
  no credential word before it: the view that rejoins lines drops the indent after
  every break. Dropping only two blanks leaves the token in three short pieces
  (``views.indent_of_two_only``).

Every case goes through ``ScheduleService`` on real PostgreSQL (API role) on the four
write paths (``run_corpus_on_postgres``): each must fail with
``schedule.secret_detected`` and its values never reach an error, a row or a log line.
Values are drawn from ``SEED`` (recorded).
"""

from __future__ import annotations

import base64
import logging
import random

import pytest

from gates.checks.corpora import CredentialCase
from gates.checks.credential_support import run_corpus_on_postgres
from gates.runner.pytest_plugin import GateEvidence

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.no_credentials")]

SEED = 20261207
WORDS = [
    "the",
    "weekly",
    "report",
    "covers",
    "sales",
    "support",
    "hiring",
    "travel",
    "budget",
    "review",
    "planning",
    "roadmap",
    "notes",
    "for",
    "each",
    "team",
    "and",
    "every",
    "region",
    "with",
    "open",
    "items",
]
PASSWORD_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789!#%&*"
TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
PROSE_BYTES = 5400
AT = {"across_first_piece": 3056, "past_first_piece": 4500}
"""Where the password phrase starts in the decoded text: its value then spans decoded
byte 3,072 (the first 4,096-character piece's end), or lies past it."""


def prose(rng: random.Random, size: int) -> str:
    words: list[str] = []
    while len(" ".join(words)) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:size]


def base64_case(rng: random.Random, name: str, at: int) -> CredentialCase:
    password = "".join(rng.choice(PASSWORD_ALPHABET) for _ in range(14))
    text = prose(rng, at) + f" db password: {password} " + prose(rng, PROSE_BYTES - at)
    blob = base64.b64encode(text.encode()).decode()
    head = "Every Monday read this note and summarize it: "
    return CredentialCase(
        case_id=f"long-base64-{name}",
        kind="password",
        encoding="base64_long",
        instruction=head + blob,
        secret=password,
        embedded=blob,
        span=(len(head), len(head) + len(blob)),
        expected_kinds=frozenset({"password_assignment"}),
        needles=(blob, password),
    )


def indented_case(rng: random.Random, indent: str, draw: int) -> CredentialCase:
    token = "ghp_" + "".join(rng.choice(TOKEN_ALPHABET) for _ in range(36))
    first, second = rng.randint(12, 17), rng.randint(26, 31)
    wrapped = f"{token[:first]}\n{indent}{token[first:second]}\n{indent}{token[second:]}"
    head = f"Every morning clone the build repository with\n{indent}"
    tail = f"\n{indent}and tell me whether the nightly build passed."
    return CredentialCase(
        case_id=f"indented-{len(indent)}-{draw}",
        kind="github_token",
        encoding="indented_wrap",
        instruction=head + wrapped + tail,
        secret=token,
        embedded=wrapped,
        span=(len(head), len(head) + len(wrapped)),
        expected_kinds=frozenset({"github_token"}),
        needles=(token, token[:first], token[first:second], token[second:]),
    )


def cases() -> list[CredentialCase]:
    """Each shape drawn twice, so each meets two of the four write paths."""
    rng = random.Random(SEED)
    drawn: list[CredentialCase] = []
    for draw in (1, 2):
        drawn += [base64_case(rng, f"{name}-{draw}", at) for name, at in AT.items()]
        drawn += [indented_case(rng, indent, draw) for indent in ("    ", "        ")]
    return drawn


async def test_long_base64_and_deep_indents_are_rejected(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    drawn = cases()
    report = await run_corpus_on_postgres(pg_url, drawn, [], log_text=lambda: caplog.text)
    gate_evidence.record("seed", SEED)
    gate_evidence.record("cases", report.cases)
    gate_evidence.record("rejected", report.rejected)
    gate_evidence.record("by_path", report.by_path)
    assert report.failures == [], f"seed {SEED}: " + "\n".join(report.failures)
    assert report.rejected == report.cases == len(drawn), f"seed {SEED}"
