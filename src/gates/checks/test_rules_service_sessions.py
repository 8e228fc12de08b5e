"""rule.http.error_envelope on the session routes: a session the caller cannot see
answers the session's own stable reason code.

Over a real uvicorn server against PostgreSQL, one schedule fires one QUEUED run and its
session. Its transcript (``GET /v1/sessions/{id}/transcript``) and its erasure
(``DELETE /v1/sessions/{id}``) asked by another principal of the same tenant holding
every scope, and by the owner for an id no session has, each answer the 404 envelope
with ``schedule.session.not_found`` and no details - never the storage layer's
``schedule.persistence.not_found`` with the id it looked up - and change nothing.

Tests of the test: ``scheduling-gates mutate`` (``svc.transcript_not_found_leaks_details``:
the transcript read lets the repository's not-found through).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import OWNER, http_world
from simulation.worlds.service import principal

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.error_envelope")]

SESSION_NOT_FOUND = "schedule.session.not_found"
MISSING = "00000000-0000-4000-8000-00000000cafe"
NEIGHBOUR = principal("session-reads-neighbour", scopes=OWNER.scopes)


async def test_a_session_out_of_sight_answers_session_not_found(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url, [OWNER, NEIGHBOUR]) as world:
        created = await world.create("session-reads")
        assert created.status_code == 201, created.text
        world.clock.advance_to(datetime.fromisoformat(created.json()["next_fire_at"]))
        world.clock.advance(1)
        assert (await world.scheduler().worker.run_once()).errors == {}
        (row,) = await world.sql("SELECT id FROM sessions")
        before = await world.sql("SELECT session_id, seq FROM session_events ORDER BY 1, 2")
        answers = {}
        for who, session_id in ((NEIGHBOUR, row["id"]), (OWNER, MISSING)):
            for method, path in (
                ("GET", "/v1/sessions/{}/transcript"),
                ("DELETE", "/v1/sessions/{}"),
            ):
                label = f"{method} {who.principal_id} {'foreign' if who is NEIGHBOUR else 'absent'}"
                response = await world.call(method, path.format(session_id), who)
                assert response.status_code == 404, (label, response.text)
                error = response.json()["error"]
                assert error["code"] == SESSION_NOT_FOUND, (label, response.text)
                assert error["details"] == {}, (label, response.text)
                answers[label] = error["code"]
        assert await world.sql("SELECT id FROM sessions") == [row]
        after = await world.sql("SELECT session_id, seq FROM session_events ORDER BY 1, 2")
        assert after == before, "a refused call changed the session"
        mine = await world.call("GET", f"/v1/sessions/{row['id']}/transcript", OWNER)
        assert mine.status_code == 200, mine.text
        gate_evidence.record("answers", answers)
