"""The head this build ships, written down for the commands that must not import
Alembic to learn it (ADR 2751), is the head Alembic computes from the chain: a new
revision that lands without moving ``HEAD_REVISION`` fails here."""

from __future__ import annotations

from scheduling.adapters.postgres.migrations import head_revision
from scheduling.adapters.postgres.schema_head import HEAD_REVISION


def test_the_written_head_is_the_chains_head() -> None:
    assert head_revision() == HEAD_REVISION
