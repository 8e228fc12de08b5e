"""The OpenAPI document: the spec's routes, each with its exact scope (security scheme
scopes and ``x-required-scopes``), checked against the spec's table."""

from __future__ import annotations

from typing import Any

from scheduling.http.app import create_app

# The spec's "Public API" table and its scope rules (schedule.write authorizes create,
# update, pause and resume; schedule.cancel the terminal cancel), plus linked routes.
SPEC = {
    ("POST", "/v1/schedules"): "schedule.write",
    ("GET", "/v1/schedules"): "schedule.read",
    ("GET", "/v1/schedules/{schedule_id}"): "schedule.read",
    ("PATCH", "/v1/schedules/{schedule_id}"): "schedule.write",
    ("POST", "/v1/schedules/{schedule_id}/pause"): "schedule.write",
    ("POST", "/v1/schedules/{schedule_id}/resume"): "schedule.write",
    ("DELETE", "/v1/schedules/{schedule_id}"): "schedule.cancel",
    ("GET", "/v1/schedules/{schedule_id}/occurrences"): "schedule.read",
    ("GET", "/v1/runs/{run_id}"): "run.read",
    ("POST", "/v1/runs/{run_id}/cancel"): "run.cancel",
    ("GET", "/v1/sessions/{session_id}/transcript"): "session.read",
    ("DELETE", "/v1/sessions/{session_id}"): None,
}
PUBLIC = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}


def document() -> dict[str, Any]:
    return create_app(object()).openapi()  # type: ignore[arg-type]


def operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): op
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
    }


def test_routes_and_scopes_equal_the_spec() -> None:
    ops = operations(document())
    assert set(ops) - PUBLIC == set(SPEC)
    for key, scope in SPEC.items():
        op = ops[key]
        want = [] if scope is None else [scope]
        assert op["x-required-scopes"] == want, key
        assert op["security"] == [{"bearer": want}], key
        assert {"401", "403"} <= set(op["responses"]), key
    for key in PUBLIC & set(ops):
        assert ops[key]["security"] == [], key


def test_bearer_scheme_and_error_envelope_declared() -> None:
    doc = document()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    ops = operations(doc)
    create = ops[("POST", "/v1/schedules")]
    header = [p for p in create["parameters"] if p["name"] == "Idempotency-Key"]
    assert header
    assert header[0]["required"] is True
    for key in SPEC:
        for status in ("400", "422", "500"):
            ref = ops[key]["responses"][status]["content"]["application/json"]["schema"]
            assert ref["$ref"].endswith("/ErrorEnvelope"), (key, status)
    stale = ops[("PATCH", "/v1/schedules/{schedule_id}")]["responses"]
    assert "409" in stale
    assert "404" in stale


def test_list_declares_bounded_limit_cursor_and_repeated_state() -> None:
    params = {p["name"]: p for p in operations(document())[("GET", "/v1/schedules")]["parameters"]}
    assert params["limit"]["schema"]["maximum"] == 100
    assert params["limit"]["schema"]["minimum"] == 1
    assert "cursor" in params
    state = params["state"]["schema"]
    options = state["anyOf"][0] if "anyOf" in state else state
    assert options["type"] == "array"
