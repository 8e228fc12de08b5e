"""The decision's three session events in one INSERT (ADR 2680).

The decision statement (ADR 2330) wrote each of a queued run's session events in a
data-modifying CTE of its own; it now writes them in one ``INSERT ... SELECT`` over a
``VALUES`` list cross-joined with the occurrence's RETURNING. What must not change:
the rows (every column of every event, exactly the decision's ``QueuedRun.events``)
and that nothing is written when the instant was already decided. The physical
insertion order is now the seq order (the per-event CTEs ran last-first).

Wrong implementations these tests reject: a VALUES row bound to another event's
parameters (a prefix slip: the rows differ from the decision's events), and the events
selected without the occurrence (a decided instant would get a second set, or fail).
The test of the test builds the first of those and shows the row check fails on it.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Insert, bindparam, column, insert, select, true, values
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from scheduling.adapters.postgres import materialization as store
from scheduling.adapters.postgres.tables import session_events
from scheduling.ports.firing import Decision
from scheduling.service.materializer import MaterializeStatus
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres

COLUMNS = [c.name for c in session_events.columns]
DIALECT: Any = asyncpg_dialect()  # type: ignore[no-untyped-call]


def _capturing(monkeypatch: pytest.MonkeyPatch) -> list[Decision]:
    seen: list[Decision] = []
    real = store.PostgresMaterializationRepository.decide

    async def decide(self: Any, decision: Decision) -> Any:
        seen.append(decision)
        return await real(self, decision)

    monkeypatch.setattr(store.PostgresMaterializationRepository, "decide", decide)
    return seen


async def _decide_once(h: MaterializeWorld, monkeypatch: pytest.MonkeyPatch) -> Decision:
    sid = await h.create()
    h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
    seen = _capturing(monkeypatch)
    result = await h.materializer().materialize(sid)
    assert result.status is MaterializeStatus.DECIDED
    (decision,) = seen
    assert decision.run is not None
    return decision


async def _written(
    h: MaterializeWorld, decision: Decision, order: str = "seq"
) -> list[dict[str, Any]]:
    assert decision.run is not None
    assert order in ("seq", "ctid")  # ctid: the order the executor inserted them in
    return await h.sql(
        f"SELECT * FROM session_events WHERE session_id = :s ORDER BY {order}",
        s=decision.run.session.id,
    )


def _expected(decision: Decision) -> list[dict[str, Any]]:
    assert decision.run is not None
    return [{name: asdict(e)[name] for name in COLUMNS} for e in decision.run.events]


def test_the_decision_statement_has_one_session_events_insert() -> None:
    sql = store.decision_statement(
        ("next_fire_at", "updated_at"), 1, run=True, outbox=False
    ).compile(DIALECT)
    assert sql.count("INSERT INTO session_events") == 1, sql
    # Every event's parameters are bound, each once, row by row in seq order.
    compiled: Any = store._events_if_new(store.SESSION_EVENTS).compile(dialect=DIALECT)
    bound = [name for name in compiled.positiontup if name.startswith("e")]
    want = [f"e{i}_{name}" for i in range(store.SESSION_EVENTS) for name in COLUMNS]
    assert bound == want


async def test_the_events_written_are_the_decisions_in_seq_order(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        decision = await _decide_once(h, monkeypatch)
        assert await _written(h, decision) == _expected(decision)
        # Inserted in seq order, as the substrate appends events one by one (the
        # per-event CTEs ran last-first: 3, 2, 1; no reader depends on it, all order
        # by seq).
        assert [row["seq"] for row in await _written(h, decision, "ctid")] == [1, 2, 3]
    finally:
        await h.close()


async def test_a_decided_instant_writes_no_second_set_of_events(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        decision = await _decide_once(h, monkeypatch)
        sid, nominal = decision.occurrence.schedule_id, decision.occurrence.nominal_fire_at
        assert decision.run is not None
        # The first run finished, so the second decision of the instant queues a run
        # too (not an overlap skip, which has no events) and its statement carries
        # three events the conflict must discard.
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :r",
            t=h.clock.now(),
            r=decision.run.run.id,
        )
        await h.sql("UPDATE schedules SET next_fire_at = :t WHERE id = :i", t=nominal, i=sid)
        before = await h.sql("SELECT * FROM session_events ORDER BY session_id, seq")
        seen = _capturing(monkeypatch)
        again = await h.materializer().materialize(sid)
        assert again.status is MaterializeStatus.ALREADY_DECIDED
        assert [d.run is not None for d in seen] == [True]
        assert await h.sql("SELECT * FROM session_events ORDER BY session_id, seq") == before
    finally:
        await h.close()


def _slipped(count: int) -> Insert:
    """A plausible wrong statement: every row's payload bound to the first event's."""
    rows = values(*(column(c.name, c.type) for c in session_events.columns), name="events").data(
        [
            tuple(
                bindparam(f"e{0 if c.name == 'payload' else i}_{c.name}", type_=c.type)
                for c in session_events.columns
            )
            for i in range(count)
        ]
    )
    chosen = select(*rows.c).select_from(store._new_occurrence).join(rows, true())
    return insert(session_events).from_select(COLUMNS, chosen)


async def test_of_the_test_a_slipped_binding_fails_the_row_check(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "_events_if_new", _slipped)
    monkeypatch.setattr(store, "_DECISIONS", {})
    h = await MaterializeWorld.open(pg_url)
    try:
        decision = await _decide_once(h, monkeypatch)
        written = await _written(h, decision)
        assert len(written) == store.SESSION_EVENTS
        assert written != _expected(decision)
    finally:
        await h.close()
