"""Worlds for the admission rules (not a test module): a materializer world with a
second tenant, one-time schedules fired at a chosen instant, on-demand runs submitted
through the run submitter, and a run's terminal usage written as the run worker would.

Every run a check counts or ignores comes from a front door: a scheduled run from the
scheduler role's materializer, an on-demand one from ``RunSubmitter``. Only the run's
end (status, finish instant, committed cost) is written directly, as the existing
admission checks do, since the run worker's usage is not what they are about.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from scheduling.domain.cadence import format_instant
from scheduling.domain.identity import Principal
from scheduling.ports.runtime import RunPriority
from scheduling.service.admission import CONCURRENCY
from scheduling.service.materializer import MaterializeResult, MaterializeStatus
from scheduling.testing import ConfiguredTenantConfiguration
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.runtime import submission, submitter
from simulation.worlds.service import CEILINGS, TENANT_B, principal, seed_durable

# The owner of the second tenant's schedules (same ceilings: the default configuration).
OTHER = principal("admission-other-owner", tenant_id=TENANT_B)

# Each on-demand submission its own id stream (a submitter's ids are seeded).
_SUBMITTERS = itertools.count(1)

Outcome = tuple[str, str | None]
"""(MATERIALIZED | MISSED | ... | RETRY, reason code)."""


def ceilings(**changes: Any) -> ConfiguredTenantConfiguration:
    """Every tenant's ceilings: the gate ceilings with ``changes``."""
    return ConfiguredTenantConfiguration(default=CEILINGS.model_copy(update=changes))


async def open_two_tenants(pg_url: str) -> MaterializeWorld:
    """The materializer world with ``OTHER`` (another tenant) seeded beside ``WHO``."""
    h = await MaterializeWorld.open(pg_url)
    await seed_durable(h.admin, [OTHER], at=h.clock.now())
    return h


def outcome(result: MaterializeResult) -> Outcome:
    """What admission made of one firing: a decided occurrence's disposition and reason,
    or RETRY with the concurrency reason (a RETRY writes no occurrence)."""
    if result.status is MaterializeStatus.RETRY:
        return "RETRY", CONCURRENCY
    assert result.status is MaterializeStatus.DECIDED, result
    assert result.occurrence is not None
    return result.occurrence.disposition.value, result.occurrence.reason_code


async def once(h: MaterializeWorld, key: str, at: datetime, who: Principal = WHO) -> UUID:
    """A one-time schedule of ``who`` at ``at`` (created now, through the service)."""
    return await h.create(who, key=key, cadence={"kind": "ONCE", "at": format_instant(at)})


async def decide(h: MaterializeWorld, sid: UUID, when: datetime) -> MaterializeResult:
    """The scheduler role's materializer fires ``sid`` with the clock at ``when``."""
    h.clock.advance_to(when)
    return await h.materializer().materialize(sid)


async def fire(h: MaterializeWorld, key: str, who: Principal = WHO) -> MaterializeResult:
    """A one-time schedule of ``who`` 30 s from now, decided a second after its instant."""
    at = h.clock.now() + timedelta(seconds=30)
    return await decide(h, await once(h, key, at, who), at + timedelta(seconds=1))


async def scheduled_run(h: MaterializeWorld, key: str, who: Principal = WHO) -> UUID:
    """A materialized scheduled run of ``who`` (created now + 31 s, left QUEUED)."""
    result = await fire(h, key, who)
    assert outcome(result) == ("MATERIALIZED", None), result
    assert result.occurrence is not None
    assert result.occurrence.run_id is not None
    return result.occurrence.run_id


async def on_demand_run(h: MaterializeWorld, priority: RunPriority, who: Principal = WHO) -> UUID:
    """An on-demand run of ``who`` submitted now (QUEUED, no schedule in its metadata)."""
    submit = submitter(h.admin, h.clock, seed=next(_SUBMITTERS))
    run = await submit.submit(who, submission("succeed", priority=priority))
    return run.id


async def end_run(h: MaterializeWorld, run_id: UUID, status: str, cost: Decimal) -> None:
    """The run ends now with ``status`` and committed usage ``cost``."""
    await h.sql(
        "UPDATE runs SET status = :s, finished_at = :t, cost = :c WHERE id = :i",
        s=status,
        t=h.clock.now(),
        c=cost,
        i=run_id,
    )


async def start_run(h: MaterializeWorld, run_id: UUID) -> None:
    """The run is claimed: RUNNING, still active."""
    await h.sql("UPDATE runs SET status = 'RUNNING' WHERE id = :i", i=run_id)
