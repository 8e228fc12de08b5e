"""rule.http.reads_equal_the_ledger over HTTP: a lifecycle write's answer says what the
write did.

A pause, a resume and a cancel each apply a fresh transition: the answer is
``replayed: false`` with the state the row now holds (an answer built from the
post-write view that calls every write a replay would tell a client its command was an
earlier one's recovery); a keyed full-definition update sent again is the one answer
that is a replay.
"""

from __future__ import annotations

import pytest

from gates.runner.pytest_plugin import GateEvidence
from simulation.worlds.http import http_world, update_body

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.reads_equal_the_ledger")]


async def test_a_fresh_transition_is_never_answered_as_a_replay(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        created = await world.create("answers-create")
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        answers = {}
        for action, state in (("pause", "PAUSED"), ("resume", "ACTIVE")):
            world.clock.advance(60)
            answer = await world.call(
                "POST", f"/v1/schedules/{sid}/{action}", json={"expected_revision": 1}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["state"] == state, action
            assert answer.json()["replayed"] is False, action
            answers[action] = answer.json()["replayed"]
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        changed = update_body(detail, title="Renamed briefing")
        key = {"Idempotency-Key": "answers-update"}
        first = await world.call("PATCH", f"/v1/schedules/{sid}", json=changed, headers=key)
        again = await world.call("PATCH", f"/v1/schedules/{sid}", json=changed, headers=key)
        assert first.status_code == 200, first.text
        assert first.json()["replayed"] is False
        assert again.status_code == 200, again.text
        assert again.json()["replayed"] is True
        world.clock.advance(60)
        cancelled = await world.call(
            "DELETE", f"/v1/schedules/{sid}", params={"expected_revision": 2}
        )
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "CANCELLED"
        assert cancelled.json()["replayed"] is False
        answers["cancel"] = cancelled.json()["replayed"]
    gate_evidence.record("replayed_answers", answers)
