"""A test of the credential gate: with the secret scanner bypassed, the gate's corpus
check reports accepted cases and planted values in the database and in the logs."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import text

import scheduling.adapters.postgres.tables as tables_module
from gates.checks.corpora import benign_corpus, credential_corpus
from gates.checks.credential_support import run_corpus
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.secrets import SecretFinding
from scheduling.testing import storage_over
from simulation.worlds.service import build_world, principal, seed_durable

pytestmark = pytest.mark.postgres


class BlindScanner:
    """A scanner that sees nothing: what a bypassed validator amounts to."""

    def scan(self, text: str) -> list[SecretFinding]:
        return []


@pytest.mark.parametrize("blind", [True, False], ids=["scanner-bypassed", "scanner-on"])
async def test_gate_fails_when_the_scanner_is_bypassed(
    pg_url: str, caplog: pytest.LogCaptureFixture, blind: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")
    cases = credential_corpus(7)[::15]
    admin = PostgresUnitOfWorkFactory.from_url(pg_url)
    who = principal("alice")
    try:
        await seed_durable(admin, [who])
        world = build_world(storage_over(admin), scanner=BlindScanner() if blind else None)

        async def dump() -> str:
            async with admin.engine.connect() as conn:
                rows = []
                for name in sorted(tables_module.metadata.tables):
                    rows += [
                        r[0] for r in await conn.execute(text(f"SELECT t::text FROM {name} t"))
                    ]
            return "\n".join(rows)

        report = await run_corpus(
            world,
            who,
            cases,
            benign_corpus(7)[:3],
            dump_database=dump,
            log_text=lambda: caplog.text,
        )
    finally:
        await admin.dispose()
    if blind:
        # Every path lets a case through, and the planted values land in rows and logs.
        assert report.accepted
        assert report.leaked_in_database
        assert report.leaked_in_logs
        assert report.failures
    else:
        assert report.failures == []
        assert report.rejected == len(cases)
