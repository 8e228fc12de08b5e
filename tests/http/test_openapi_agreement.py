"""The OpenAPI document and the validators agree (issue 23 finding 5, ADR 2132): the
Allow header of every path lists the methods it serves, a non-JSON body is 415 with its
registered code, ``expected_revision`` has the same bounds in the DELETE query and in
every body, and the values the document declares valid are accepted (``1.0`` is the
integer 1) while the constraints the validators enforce are declared (non-blank
titles, positive limits, bounded cursors and revisions)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import httpx
import pytest
from jsonschema import Draft202012Validator

from scheduling.domain.cadence import parse_cadence
from scheduling.domain.errors import ValidationError
from scheduling.http.app import create_app
from simulation.worlds.http import http_world, update_body

pytestmark = pytest.mark.postgres

IMPLICIT = {"HEAD", "OPTIONS"}
INT32_MAX = 2**31 - 1
SOME = UUID("6f1c2a3e-0000-4000-8000-0000000000a1")


def _doc() -> dict[str, Any]:
    return create_app(object()).openapi()  # type: ignore[arg-type]


def _code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def _concrete(path: str) -> str:
    return (
        path.replace("{schedule_id}", str(SOME))
        .replace("{run_id}", str(SOME))
        .replace("{session_id}", str(SOME))
    )


async def test_allow_lists_every_method_a_path_serves(pg_url: str) -> None:
    doc = _doc()
    async with http_world(pg_url) as world:
        for path, ops in doc["paths"].items():
            response = await world.call("OPTIONS", _concrete(path))
            assert response.status_code == 405, (path, response.text)
            assert _code(response) == "schedule.http.method_not_allowed"
            allowed = {m.strip() for m in response.headers["allow"].split(",")}
            assert allowed - IMPLICIT == {m.upper() for m in ops}, (path, allowed)
        item = await world.call("OPTIONS", f"/v1/schedules/{SOME}")
        assert {"GET", "PATCH", "DELETE"} <= set(item.headers["allow"].replace(" ", "").split(","))


async def test_a_body_that_is_not_json_is_415(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        before = await world.counts()
        sid = SOME
        for method, path, extra in (
            ("POST", "/v1/schedules", {"Idempotency-Key": "t1"}),
            ("PATCH", f"/v1/schedules/{sid}", {}),
            ("POST", f"/v1/schedules/{sid}/pause", {}),
        ):
            for media in ("text/plain", "application/x-www-form-urlencoded", None):
                headers = {**extra, **({"content-type": media} if media else {})}
                response = await world.call(
                    method, path, content=b'{"expected_revision": 1}', headers=headers
                )
                assert (response.status_code, _code(response)) == (
                    415,
                    "schedule.http.unsupported_media_type",
                ), (method, path, media, response.text)
        # A JSON body with a charset parameter is still JSON.
        ok = await world.call(
            "POST",
            f"/v1/schedules/{sid}/pause",
            content=b'{"expected_revision": 1}',
            headers={"content-type": "application/json; charset=utf-8"},
        )
        assert ok.status_code == 404, ok.text
        assert await world.counts() == before


async def test_expected_revision_is_bounded_alike_and_one_point_zero_is_one(pg_url: str) -> None:
    async with http_world(pg_url) as world:
        made = await world.create("k")
        assert made.status_code == 201, made.text
        sid = made.json()["id"]
        for too_big in (INT32_MAX + 1, 2**63):
            deleted = await world.call(
                "DELETE", f"/v1/schedules/{sid}", params={"expected_revision": too_big}
            )
            paused = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": too_big}
            )
            assert (deleted.status_code, _code(deleted)) == (422, "schedule.http.invalid_request")
            assert (paused.status_code, _code(paused)) == (422, "schedule.http.invalid_request")
        for zero in (0, -1):
            paused = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": zero}
            )
            assert (paused.status_code, _code(paused)) == (422, "schedule.http.invalid_request")
        # JSON Schema's integer includes 1.0; so does the edge (never "1" or true).
        paused = await world.call(
            "POST", f"/v1/schedules/{sid}/pause", json={"expected_revision": 1.0}
        )
        assert (paused.status_code, paused.json()["state"]) == (200, "PAUSED"), paused.text
        for wrong in ("1", True, 1.5):
            refused = await world.call(
                "POST", f"/v1/schedules/{sid}/resume", json={"expected_revision": wrong}
            )
            assert refused.status_code == 422, (wrong, refused.text)
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        float_limits = {**detail["revision"]["limits"], "max_steps": 30.0}
        updated = await world.call(
            "PATCH",
            f"/v1/schedules/{sid}",
            json=update_body(
                detail, expected_revision=1.0, run_timeout_seconds=600.0, limits=float_limits
            ),
        )
        assert updated.status_code == 200, updated.text


def _schema(doc: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    name = ref["$ref"].rsplit("/", 1)[1]
    return dict(doc["components"]["schemas"][name])


def test_the_document_declares_the_constraints_the_validators_enforce() -> None:
    doc = _doc()
    create = doc["paths"]["/v1/schedules"]["post"]
    body = _schema(doc, create["requestBody"]["content"]["application/json"]["schema"])
    props = body["properties"]
    assert props["title"]["minLength"] == 1
    assert props["title"]["maxLength"] == 200
    assert props["instruction"]["maxLength"] == 20_000
    assert props["requested_scopes"]["items"]["enum"]
    assert {c["properties"]["kind"]["const"] for c in props["cadence"]["anyOf"]} == {
        "ONCE",
        "DAILY",
        "WEEKLY",
        "MONTHLY",
        "YEARLY",
    }
    for name in ("run_timeout_seconds", "misfire_grace_seconds", "max_consecutive_failures"):
        assert (props[name]["type"], props[name]["minimum"]) == ("integer", 1)
    limits = _schema(doc, props["limits"])["properties"]
    for name in ("max_steps", "max_model_calls", "max_tool_calls"):
        assert limits[name]["minimum"] == 1
    assert limits["reserve_steps"]["minimum"] == 0
    bounds = []
    for path, method in (
        ("/v1/schedules/{schedule_id}/pause", "post"),
        ("/v1/schedules/{schedule_id}", "patch"),
    ):
        schema = _schema(
            doc, doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
        )
        revision = schema["properties"]["expected_revision"]
        bounds.append((revision["type"], revision["minimum"], revision["maximum"]))
    query = {
        p["name"]: p["schema"]
        for p in doc["paths"]["/v1/schedules/{schedule_id}"]["delete"]["parameters"]
    }["expected_revision"]
    bounds.append((query["type"], query["minimum"], query["maximum"]))
    assert set(bounds) == {("integer", 1, INT32_MAX)}
    listing = {p["name"]: p["schema"] for p in doc["paths"]["/v1/schedules"]["get"]["parameters"]}
    cursor = listing["cursor"]["anyOf"][0]
    assert cursor["maxLength"] == 512
    for path, ops in doc["paths"].items():
        for op in ops.values():
            if "requestBody" in op:
                assert "415" in op["responses"], path


async def test_an_instant_before_the_first_utc_instant_is_422_not_500(pg_url: str) -> None:
    # Found by the schemathesis run of this issue: astimezone(UTC) overflowed (500).
    async with http_world(pg_url) as world:
        for at in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
            response = await world.create(at, cadence={"kind": "ONCE", "at": at})
            assert (response.status_code, _code(response)) == (
                422,
                "schedule.cadence.invalid_instant",
            ), response.text


def test_the_cadence_schema_accepts_what_the_domain_parses_and_no_more() -> None:
    props = _schema(
        _doc(),
        _doc()["paths"]["/v1/schedules"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ],
    )["properties"]
    validator = Draft202012Validator(props["cadence"])
    civil = {"local_time": "09:00", "timezone": "Europe/Paris"}
    cases = [
        {"kind": "ONCE", "at": "2030-05-01T09:00:00Z"},
        {"kind": "ONCE", "at": "2030-05-01T09:00:00.5+02:00"},
        {"kind": "DAILY", **civil},
        {"kind": "WEEKLY", **civil, "weekdays": [1, 7]},
        {"kind": "MONTHLY", **civil, "days_of_month": [31]},
        {"kind": "MONTHLY", **civil, "last_day": True},
        {"kind": "MONTHLY", **civil, "days_of_month": [], "last_day": True},
        {"kind": "YEARLY", **civil, "dates": [{"month": 2, "day": 29}]},
        # refused by both
        {"kind": "MONTHLY", **civil},
        {"kind": "MONTHLY", **civil, "days_of_month": [], "last_day": False},
        {"kind": "YEARLY", **civil, "dates": [{"month": 2, "day": 30}]},
        {"kind": "WEEKLY", **civil, "weekdays": [1, 1]},
        {"kind": "DAILY", "local_time": "24:00", "timezone": "UTC"},
        {"kind": "DAILY", "local_time": "09:00", "timezone": "Mars/Olympus"},
        {"kind": "DAILY", **civil, "every": 2},
        {"kind": "ONCE", "at": "2030-05-01T09:00:00"},
    ]
    for cadence in cases:
        try:
            parse_cadence(cadence)
            parsed = True
        except ValidationError:
            parsed = False
        assert validator.is_valid(cadence) == parsed, cadence
