"""gate.schedule.no_credentials: no credential becomes schedule state.

1. Structural: ``gates.checks.credential_walk`` walks every pydantic model and dataclass of
   the product (domain, ports, service, adapters) and every table of the persistence
   metadata; no field, column or table may read like a token, secret, cookie or
   credential (the walk's allow-list names each exception with its reason). The walk
   must also find a planted credential field, so it cannot pass vacuously.
2. Corpus: the seeded credential corpus (several hundred cases across providers and
   encodings) is submitted through ``ScheduleService`` on real PostgreSQL (API role)
   by create (instruction and title), conversational patch and full update. Each must
   fail with ``schedule.secret_detected``; afterwards no planted value may appear in
   any error, in any row of any table, or in the captured logs (SQLAlchemy statement
   and parameter logging switched on, so a value that reached the database would be
   logged too). A benign control set must be accepted.
   The benign set includes ``EDGE_BENIGN`` (near misses of the corpus's shapes and
   encodings) and a long instruction of ordinary prose across the scanner's window.
3. Process log lines: the same corpus logged through the process's own handler
   (``scheduling.logs.configure``, text and JSON) by a careless caller - in a message,
   a ``code``/``fault`` extra, a traceback, and on a ``safe_fields`` record with an
   extra or a traceback - never reaches a written line: the handler's redaction is the
   second line of defence the module promises. Nor does any part of it: where the
   value is written as is, no ``FRAGMENT_CHARS`` letters and digits of it in a row
   survive (a redaction that stops short of the value's end - a JWT's signature, a
   key block's body - leaves the rest of the credential in the line).
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from gates.checks.corpora import EDGE_BENIGN, CredentialCase, benign_corpus, credential_corpus
from gates.checks.corpora.credentials import window_filler
from gates.checks.credential_support import run_corpus_on_postgres
from gates.checks.credential_walk import credential_fields, discover_models
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.secrets import WINDOW_CHARS
from scheduling.logs import LOG_FORMATS, configure, safe_fields
from scheduling.testing import tables as tables_module

GATE = "gate.schedule.no_credentials"
# The whole product: domain values, port records, service results, adapter models.
PACKAGES = ("scheduling",)
CORPUS_SEED = 20261130
BENIGN = 24
FRAGMENT_CHARS = 10
"""A run of this many of a value's letters and digits in a log line is part of it (the
corpus's values are random: no such run occurs in the line's other text)."""


@dataclass
class _Planted:
    schedule_id: str
    api_token: str


@pytest.mark.gate(GATE)
def test_structural_walk_finds_no_credential_field(gate_evidence: GateEvidence) -> None:
    models = discover_models(*PACKAGES)
    metadata = tables_module.metadata
    problems = credential_fields(models, metadata)
    assert problems == [], "\n".join(str(p) for p in problems)
    # The walk is sensitive: a planted credential field is reported.
    assert [p.name for p in credential_fields([_Planted])] == ["api_token"]
    gate_evidence.record("models_walked", len(models))
    gate_evidence.record("tables_walked", sorted(metadata.tables))
    gate_evidence.record("columns_walked", sum(len(t.columns) for t in metadata.tables.values()))


@pytest.mark.postgres
@pytest.mark.gate(GATE)
async def test_credential_corpus_is_rejected_and_never_stored_or_logged(
    pg_url: str, gate_evidence: GateEvidence, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    cases = credential_corpus(CORPUS_SEED)
    # Ordinary prose longer than one scanner window: long text alone is no credential.
    long_prose = window_filler(WINDOW_CHARS + 512)
    benign = [*benign_corpus(CORPUS_SEED)[:BENIGN], *EDGE_BENIGN, long_prose]
    report = await run_corpus_on_postgres(pg_url, cases, benign, log_text=lambda: caplog.text)
    gate_evidence.record("corpus_seed", CORPUS_SEED)
    gate_evidence.record("cases", report.cases)
    gate_evidence.record("rejected", report.rejected)
    gate_evidence.record("by_path", report.by_path)
    gate_evidence.record("encodings", sorted({c.encoding for c in cases}))
    gate_evidence.record("kinds", len({c.kind for c in cases}))
    gate_evidence.record("benign_accepted", report.benign_accepted)
    gate_evidence.record("edge_benign", len(EDGE_BENIGN))
    gate_evidence.record("log_records_searched", len(caplog.records))
    gate_evidence.record("database", "postgresql (API role); every table dumped as row text")
    assert report.cases >= 300
    assert report.failures == [], "\n".join(report.failures[:50])
    assert report.rejected == report.cases
    assert report.benign_accepted == len(benign)


def fragments(case: CredentialCase) -> frozenset[str]:
    """Every ``FRAGMENT_CHARS`` consecutive letters and digits of the value, when the
    instruction carries it as is (an encoded value is searched for whole)."""
    if case.secret not in case.instruction:
        return frozenset()
    runs = re.findall(r"[A-Za-z0-9]+", case.secret)
    n = FRAGMENT_CHARS
    return frozenset(run[i : i + n] for run in runs for i in range(len(run) - n + 1))


def _message(log: logging.Logger, case: CredentialCase) -> None:
    log.warning("rejected schedule: %s", case.instruction)


def _extra(log: logging.Logger, case: CredentialCase) -> None:
    log.warning("retrying", extra={"fault": case.embedded})


def _safe_extra(log: logging.Logger, case: CredentialCase) -> None:
    # The caller vouches for its message only: an extra on it is still client text.
    log.info("access", extra={**safe_fields(), "code": case.embedded})


def _traceback(log: logging.Logger, case: CredentialCase) -> None:
    try:
        raise RuntimeError(f"materializing failed on {case.instruction}")
    except RuntimeError:
        log.exception("materializing failed")


def _safe_traceback(log: logging.Logger, case: CredentialCase) -> None:
    try:
        raise RuntimeError(f"request failed on {case.instruction}")
    except RuntimeError:
        log.error("request failed", exc_info=True, extra=safe_fields())


LOG_FORMS: tuple[Callable[[logging.Logger, CredentialCase], None], ...] = (
    _message,
    _extra,
    _safe_extra,
    _traceback,
    _safe_traceback,
)


@pytest.mark.gate(GATE)
def test_credential_corpus_never_reaches_a_process_log_line(gate_evidence: GateEvidence) -> None:
    cases = credential_corpus(CORPUS_SEED)
    leaks: list[str] = []
    partial: list[str] = []
    written = 0
    searched = sum(1 for case in cases if fragments(case))
    for shift, kind in enumerate(LOG_FORMATS):
        stream = io.StringIO()
        log = logging.getLogger(f"gates.checks.no_credentials.{kind}")
        log.propagate = False  # only the process's handler writes these records
        # No window: every record is written in full (none folded into a summary).
        handler = configure(stream, kind=kind, level="DEBUG", repeat_window_seconds=1e-9, root=log)
        try:
            # Each case in one form per format (the forms rotate): every form meets
            # every encoding, at a sixth of the cost of all of them.
            for n, case in enumerate(cases):
                form = LOG_FORMS[(n + shift) % len(LOG_FORMS)]
                # One record at a time: the long cases would make a growing buffer quadratic.
                stream.seek(0)
                stream.truncate()
                form(log, case)
                line = stream.getvalue()
                assert line, f"{form.__name__} wrote nothing: the capture is broken"
                written += 1
                if any(needle in line for needle in case.needles):
                    leaks.append(f"{kind} {form.__name__} {case!r}")
                elif any(piece in line for piece in fragments(case)):
                    partial.append(f"{kind} {form.__name__} {case!r}")
        finally:
            log.removeHandler(handler)
            handler.close()
    gate_evidence.record("log_lines_written", written)
    gate_evidence.record("log_forms", [f.__name__ for f in LOG_FORMS])
    gate_evidence.record("cases_searched_for_fragments", searched)
    assert written == len(cases) * len(LOG_FORMATS)
    assert searched >= len(cases) // 5
    assert leaks == [], "\n".join(leaks[:50])
    assert partial == [], "part of a value in a line:\n" + "\n".join(partial[:50])
