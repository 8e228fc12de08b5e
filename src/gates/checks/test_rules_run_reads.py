"""rule.http.error_envelope on the run routes: a run the caller cannot see answers the
run's own stable reason code.

Over a real uvicorn server against PostgreSQL, one schedule fires one QUEUED run. Read
(``GET /v1/runs/{id}``) and cancelled (``POST /v1/runs/{id}/cancel``) by another
principal of the same tenant, and read and cancelled by id when no such run exists,
every answer is the 404 envelope with ``schedule.run.not_found`` (docs/reason-codes.md)
and no details - never the storage layer's ``schedule.persistence.not_found`` with the
id it looked up.

Tests of the test: ``scheduling-gates mutate`` (``runs.not_found_leaks_details``: the
read lets the repository's not-found through).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import OWNER, http_world
from simulation.worlds.service import principal

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.error_envelope")]

RUN_NOT_FOUND = "schedule.run.not_found"
MISSING = "00000000-0000-4000-8000-00000000beef"
NEIGHBOUR = principal("run-reads-neighbour", scopes=OWNER.scopes)


async def test_a_run_out_of_sight_answers_run_not_found(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, [OWNER, NEIGHBOUR]) as world:
        created = await world.create("run-reads")
        assert created.status_code == 201, created.text
        world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
        world.clock.advance(1)
        assert (await world.scheduler().worker.run_once()).errors == {}
        (run,) = await world.sql("SELECT id FROM runs")
        answers = {}
        for who, run_id in ((NEIGHBOUR, run["id"]), (OWNER, MISSING)):
            for method, path in (("GET", "/v1/runs/{}"), ("POST", "/v1/runs/{}/cancel")):
                label = f"{method} {who.principal_id} {'foreign' if who is NEIGHBOUR else 'absent'}"
                response = await world.call(method, path.format(run_id), who)
                assert response.status_code == 404, (label, response.text)
                error = response.json()["error"]
                assert error["code"] == RUN_NOT_FOUND, (label, response.text)
                assert error["details"] == {}, (label, response.text)
                answers[label] = error["code"]
        (after,) = await world.sql("SELECT status FROM runs")
        assert after["status"] == "QUEUED"
        gate_evidence.record("answers", answers)
