"""``rule.connection.refusal_waited_out`` at the API (ADR 2220), over a real uvicorn
server against PostgreSQL: a pooled connection whose backend died since its last use
costs no request.

The API's pool is filled by concurrent reads, then every backend serving it is
terminated (``pg_terminate_backend``, as a restart or an operator would). The next
requests, reads and a create, must each be served: the unit of work's first round trip
meets the dead connection, classifies the fault and tries a fresh one, instead of
answering one 503 per dead connection.

Test of the test: ``scheduling-gates mutate`` (``faults.interface_error_unclassified``).
A terminated backend left unclassified (57P01) is caught only when the driver reads the
server's goodbye before it sees the socket closed, which load decides: not shipped.
"""

from __future__ import annotations

import asyncio

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import HttpWorld, http_world

pytestmark = pytest.mark.postgres

RULE = "rule.connection.refusal_waited_out"
TERMINATE = """SELECT count(*) AS n FROM (
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid()
    AND backend_type = 'client backend'
) AS killed"""


async def filled(world: HttpWorld) -> None:
    """Hold several API connections at once, so the pool keeps more than one."""
    answers = await asyncio.gather(*(world.call("GET", "/v1/schedules") for _ in range(4)))
    assert all(a.status_code == 200 for a in answers), [a.text for a in answers]


async def terminated(world: HttpWorld) -> int:
    async with world.admin.engine.connect() as conn:
        result = await conn.exec_driver_sql(TERMINATE)
        killed = int(result.scalar_one())
        await conn.commit()
    return killed


@pytest.mark.rule(RULE)
async def test_a_terminated_pooled_connection_costs_no_request(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        served: list[int] = []
        killed = 0
        for round_ in range(2):
            await filled(world)
            killed += await terminated(world)
            for n in range(3):
                read = await world.call("GET", "/v1/schedules")
                assert read.status_code == 200, (round_, n, read.text)
                served.append(read.status_code)
            created = await world.create(f"after-terminate-{round_}")
            assert created.status_code == 201, (round_, created.text)
            served.append(created.status_code)
        assert killed >= 2, f"only {killed} backends were terminated: nothing was tested"
    gate_evidence.record("backends_terminated", killed)
    gate_evidence.record("served_after", served)
