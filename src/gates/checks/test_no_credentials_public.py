"""gate.schedule.no_credentials, against public vendor token formats (not the scanner's).

The corpus (``gates.checks.corpora.public_formats``) is drawn from gitleaks' default
rules and detect-secrets' token plugins (``public_formats.toml`` names the commits),
plus random tokens and passwords in credential context (and those again re-cased as a
Turkish locale does, dotted capital and dotless small i for ``i``/``I``: ADR 2630),
with a benign control set of commit ids, digests, URLs and UUIDs in prose. Nothing in
it reads the product's detector table. Every case goes through ``ScheduleService`` on
real PostgreSQL (API role) on the four write paths and must fail with
``schedule.secret_detected``, its value never in an error, a row or a log line; every
benign text must be accepted.
The seed is fixed and recorded (``CORPUS_SEED``); rules no draw could satisfy, or that
carry no value, are recorded, never silently dropped.
"""

from __future__ import annotations

import logging

import pytest

from gates.checks.corpora.public_formats import (
    BENIGN,
    FORMATS_FILE,
    entropy_cases,
    load_rules,
    turkish_cased_cases,
    vendor_cases,
)
from gates.checks.credential_support import run_corpus_on_postgres
from gates.runner.pytest_plugin import GateEvidence

GATE = "gate.schedule.no_credentials"
CORPUS_SEED = 20261201


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_public_format_corpus_is_rejected_and_never_stored_or_logged(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    sources, rules = load_rules()
    vendor, skipped = vendor_cases(CORPUS_SEED)
    # The Turkish-cased cases are non-ASCII text whose only credential word needs an
    # ``i`` no ASCII character of the text supplies: a scanner that filters such text by
    # its ASCII characters skips the one detector that finds it (ADR 2630).
    cased = turkish_cased_cases(CORPUS_SEED)
    cases = vendor + entropy_cases(CORPUS_SEED) + cased
    report = await run_corpus_on_postgres(pg_url, cases, BENIGN, log_text=lambda: caplog.text)
    gate_evidence.record("corpus_seed", CORPUS_SEED)
    gate_evidence.record("formats_file", FORMATS_FILE.name)
    gate_evidence.record("sources", sources)
    gate_evidence.record("rules", len(rules))
    gate_evidence.record("rules_without_a_case", skipped)
    gate_evidence.record("vendor_cases", len(vendor))
    gate_evidence.record("turkish_cased_cases", len(cased))
    gate_evidence.record("cases", report.cases)
    gate_evidence.record("rejected", report.rejected)
    gate_evidence.record("by_path", report.by_path)
    gate_evidence.record("benign_accepted", f"{report.benign_accepted} of {len(BENIGN)}")
    gate_evidence.record(
        "replay",
        f"python -c 'from gates.checks.corpora.public_formats import vendor_cases; "
        f"vendor_cases({CORPUS_SEED})'",
    )
    # Coverage by construction: every rule but the recorded few yields cases.
    assert len(skipped) <= 8, skipped
    assert len(vendor) >= 2 * (len(rules) - len(skipped)) - 8
    assert report.failures == [], "\n".join(report.failures[:50])
    assert report.rejected == report.cases
    assert report.benign_accepted == len(BENIGN)
