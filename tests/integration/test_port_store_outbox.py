"""The outcome outbox through the materializer's port store on PostgreSQL.

The materializer composes its store from the ordinary ports
(``scheduling.service.firing.PortMaterializationStore``) whenever the storage offers no
one-statement-per-step store: with the static principal directory, and in memory.
Production refuses the static directory, so this is a development path no gate sees
(the gate worlds all run the PostgreSQL store); here the same materializer is built by
hand over the world's scheduler login, durable directories and PostgreSQL admission
with no store given: a MISSED outcome (past its grace) commits its
``schedule_run_finished`` row with the decision, exactly one, naming the revision's
title and the nominal instant; a MATERIALIZED occurrence writes none until its run is
accounted.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduling.domain.cadence import format_instant
from scheduling.service.materializer import ScheduleMaterializer
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


def port_materializer(h: MaterializeWorld) -> ScheduleMaterializer:
    principals, agents = h.storage.directories("scheduler", durable=True)
    return ScheduleMaterializer(
        uow=h.storage.as_role("scheduler"),
        clock=h.clock,
        ids=h.world.ids.fork("port-store"),
        principals=principals,
        agents=agents,
        tenants=h.tenants,
        admission=h.storage.admission(h.tenants, backoff_seconds=0.5),
    )


async def test_the_port_store_writes_the_skipped_outcome_with_its_decision(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(title="Port store", misfire_grace_seconds=60)
        materializer = port_materializer(h)
        fired = await h.next_fire(sid)
        h.clock.advance_to(fired + timedelta(seconds=1))
        first = await materializer.materialize(sid)
        assert first.occurrence is not None, first
        assert first.occurrence.disposition.value == "MATERIALIZED", first
        assert first.run_id is not None, first
        assert await h.sql("SELECT id FROM schedule_outbox") == [], "a row before accounting"
        await h.sql(
            "UPDATE runs SET status = 'COMPLETED', finished_at = :t WHERE id = :i",
            t=h.clock.now(),
            i=first.run_id,
        )
        missed_at = await h.next_fire(sid)
        h.clock.advance_to(missed_at + timedelta(seconds=61))
        second = await materializer.materialize(sid)
        assert second.occurrence is not None, second
        assert second.occurrence.disposition.value == "MISSED", second
        rows = await h.sql(
            "SELECT occurrence_id, kind, payload FROM schedule_outbox ORDER BY created_at"
        )
        assert rows == [
            {
                "occurrence_id": second.occurrence.id,
                "kind": "schedule_run_finished",
                "payload": {"title": "Port store", "nominal_fire_at": format_instant(missed_at)},
            }
        ], rows
    finally:
        await h.close()
