"""gate.schedule.no_credentials: assignment forms and sentence stops.

Three shapes the corpora did not draw, each once passed (or refused) wrongly:

* Go's ``:=`` (``password := "hunter22"``, ``api_key := "<value>"``): an assignment
  like ``=``; a password detector that knows only ``=`` and ``=>`` accepts the first
  (``secrets.walrus_password``). (The keyed detectors' ``:=`` is covered twice: the
  keyword-free ``keyed_high_entropy`` finds a random value after any name and ``:=``.)
* A quoted API secret holding symbols (a Django ``SECRET_KEY = '<50 symbols>'``, a
  generated ``client_secret: "<value>"``): the quote ends the value, so every symbol
  belongs to it; a value class of letters, digits and ``._~+/=-`` only accepts them
  (``secrets.quoted_secret_without_symbols``).
* Prose whose answer ends its sentence (``Password: forgotten? Summarize ...``): the
  stop is punctuation, not a symbol of a password, so it is accepted; a password that
  carries a digit is refused whatever ends it (``secrets.sentence_stop_is_a_symbol``).

Every credential goes through ``ScheduleService`` on real PostgreSQL on the four write
paths (``run_corpus_on_postgres``) and must fail with ``schedule.secret_detected``, its
value never in an error, a row or a log line; every benign text must be accepted.
Values are drawn from ``SEED`` (recorded).
"""

from __future__ import annotations

import logging
import random

import pytest

from gates.checks.corpora import CredentialCase
from gates.checks.credential_support import run_corpus_on_postgres
from gates.runner.pytest_plugin import GateEvidence

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.no_credentials")]

SEED = 20261207
LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
SYMBOLS = "#!$@%^&*()"

BENIGN = (
    "Password: forgotten? Summarize the reset flow doc for new hires.",
    "Password: expired! Remind users on Monday to choose a new one.",
    "Passcode: unknown. Ask the front desk every Friday and tell me what they say.",
)


def _draw(rng: random.Random, size: int, symbols: str = "") -> str:
    """``size`` characters with at least two digits (and two symbols, when given)."""
    chars = [rng.choice(LETTERS) for _ in range(size - 4)]
    chars += [rng.choice("23456789") for _ in range(2)]
    chars += [rng.choice(symbols or LETTERS) for _ in range(2)]
    rng.shuffle(chars)
    return "".join(chars)


def _case(case_id: str, kind: str, template: str, secret: str) -> CredentialCase:
    instruction = template.format(secret=secret)
    start = instruction.index(secret)
    return CredentialCase(
        case_id=case_id,
        kind=kind,
        encoding="plain",
        instruction=instruction,
        secret=secret,
        embedded=secret,
        span=(start, start + len(secret)),
        expected_kinds=frozenset({kind}),
        needles=(secret,),
    )


def cases() -> list[CredentialCase]:
    rng = random.Random(SEED)
    drawn: list[CredentialCase] = []
    for n in (1, 2):
        drawn += [
            _case(
                f"walrus-password-{n}",
                "password_assignment",
                'Every night run the backup job with password := "{secret}" and report.',
                _draw(rng, 10),
            ),
            _case(
                f"walrus-bare-password-{n}",
                "password_assignment",
                "At 9am log in with db_pass := {secret} and list the slow queries.",
                _draw(rng, 12),
            ),
            _case(
                f"walrus-api-key-{n}",
                "generic_api_key_assignment",
                'Each Monday call the billing API with api_key := "{secret}" and sum it.',
                _draw(rng, 24),
            ),
            _case(
                f"quoted-secret-key-{n}",
                "generic_api_key_assignment",
                "Deploy the Django app daily with SECRET_KEY = '{secret}' set.",
                _draw(rng, 50, SYMBOLS),
            ),
            _case(
                f"quoted-client-secret-{n}",
                "generic_api_key_assignment",
                'Refresh the CRM export at noon; client_secret: "{secret}" for the OAuth app.',
                _draw(rng, 16, SYMBOLS),
            ),
            _case(
                f"sentence-stop-password-{n}",
                "password_assignment",
                "Password: {secret}! Rotate it every quarter and remind me a week before.",
                _draw(rng, 10),
            ),
        ]
    return drawn


async def test_walrus_quoted_symbols_and_sentence_stops(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    drawn = cases()
    report = await run_corpus_on_postgres(pg_url, drawn, BENIGN, log_text=lambda: caplog.text)
    gate_evidence.record("seed", SEED)
    gate_evidence.record("cases", report.cases)
    gate_evidence.record("rejected", report.rejected)
    gate_evidence.record("benign_accepted", f"{report.benign_accepted} of {len(BENIGN)}")
    assert report.failures == [], f"seed {SEED}: " + "\n".join(report.failures)
    assert report.rejected == report.cases == len(drawn), f"seed {SEED}"
    assert report.benign_accepted == len(BENIGN), f"seed {SEED}"
