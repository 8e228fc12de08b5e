"""The decision in one statement (ADR 2330): what a decision sends on the hot path.

A MATERIALIZED decision sends three statements through ``Transaction.fetch`` between
BEGIN and COMMIT: the due lock, the context read with the usage, and the decision
statement. An instant already decided sends the same decision statement (which writes
nothing), then one read of the committed occurrence and the advance alone. The wrong
implementations these tests reject: the decision split back into its writes (more
statements), and a decision statement whose writes do not depend on the occurrence
insert (a second session and run on a decided instant).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from scheduling.adapters.postgres import materialization as store
from scheduling.adapters.postgres.transaction import Transaction
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


def _recording(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    sent: list[Any] = []
    real = Transaction.fetch

    async def fetch(self: Transaction, prepared: Any, params: Any = None) -> Any:
        sent.append(prepared)
        return await real(self, prepared, params)

    monkeypatch.setattr(Transaction, "fetch", fetch)
    return sent


async def test_a_materialized_decision_is_three_statements(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        sent = _recording(monkeypatch)
        result = await h.materializer().materialize(sid)
        assert result.status is MaterializeStatus.DECIDED
        assert len(sent) == 3, sent
        assert sent[0] is store._LOCK_DUE_ADMITTING
        assert sent[1] is store._CONTEXT_WITH_USAGE
        assert sent[2] in store._DECISIONS.values()
    finally:
        await h.close()


async def test_a_decided_instant_writes_nothing_of_the_second_decision(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create()
        nominal = await h.next_fire(sid)
        h.clock.advance_to(nominal + timedelta(seconds=1))
        first = await h.materializer().materialize(sid)
        assert first.status is MaterializeStatus.DECIDED
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=nominal, i=sid)
        before = await h.counts()
        sent = _recording(monkeypatch)
        again = await h.materializer().materialize(sid)
        assert again.status is MaterializeStatus.ALREADY_DECIDED
        assert again.occurrence == first.occurrence
        assert await h.counts() == before
        assert sent[2] in store._DECISIONS.values()
        assert sent[3] is store._DECIDED
        assert len(sent) == 5, sent  # lock, context, decision, the read, the advance
    finally:
        await h.close()
