"""No error detail echoes a submitted value that could be a credential (issue 23
finding 3, ADR 2130): a token pasted as a scope, as a cadence field name, as an unknown
body field or as a text path comes back in no part of the response."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.errors import ValidationError
from scheduling.http.errors import scheduling_error_response
from simulation.worlds.http import http_world

pytestmark = pytest.mark.postgres

TOKEN = "ghp_" + "Zq7Rk2Lm9Xv4Np8Ws3Bt6Yd1Hc5Jf0Ga2Ue"
LOWER = "a3f9c2e81b7d4f6a09c5e2b8d1f7a4c3"
"""A lowercase hex secret: the shape a closed vocabulary name could take if unbounded."""


async def test_no_error_response_echoes_a_pasted_credential(pg_url: str) -> None:
    unknown_field: dict[str, Any] = {TOKEN: "x"}
    async with http_world(pg_url) as world:
        responses = {
            "scope": await world.create("s1", requested_scopes=[TOKEN, "memory.read"]),
            "lower-scope": await world.create("s2", requested_scopes=[LOWER]),
            "cadence-field": await world.create(
                "c1",
                cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "UTC", TOKEN: 1},
            ),
            "cadence-lower": await world.create(
                "c2",
                cadence={"kind": "DAILY", "local_time": "09:00", "timezone": "UTC", LOWER: 1},
            ),
            "body-field": await world.create("b1", **unknown_field),
            "limits-field": await world.create(
                "l1",
                limits={
                    "max_steps": 1,
                    "max_model_calls": 1,
                    "max_tool_calls": 1,
                    "max_cost": "1",
                    LOWER: 2,
                },
            ),
        }
        for name, response in responses.items():
            assert response.status_code == 422, (name, response.text)
            assert response.json()["error"]["code"].startswith("schedule."), name
            assert TOKEN not in response.text, (name, response.text)
            assert TOKEN[4:20] not in response.text, (name, response.text)
            assert LOWER not in response.text, (name, response.text)
        scope = responses["scope"].json()["error"]
        assert scope["code"] == "schedule.validation.unknown_scope"
        assert scope["details"]["count"] == 1


def test_closed_vocabulary_details_still_travel() -> None:
    error = ValidationError(
        "schedule.cadence.unknown_field",
        "DAILY does not define these fields",
        {"fields": ["every", LOWER], "field": "cadence.dates[3].month", "position": 4},
    )
    details = bytes(scheduling_error_response(error).body).decode()
    assert '"every"' in details
    assert "cadence.dates[3].month" in details
    assert '"position":4' in details
    assert LOWER not in details
