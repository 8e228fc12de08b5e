"""The one code -> HTTP status table is complete against the reason-code registry."""

from __future__ import annotations

import importlib
import pkgutil

import scheduling
from scheduling.domain.errors import NotFoundError, SchedulingError, ValidationError
from scheduling.domain.reasons import all_reasons
from scheduling.http.errors import STATUS, scheduling_error_response, status_of

ALLOWED = {400, 401, 403, 404, 405, 409, 413, 415, 422, 500, 503}


def registered() -> dict[str, str]:
    for info in pkgutil.walk_packages(scheduling.__path__, prefix="scheduling."):
        importlib.import_module(info.name)
    return all_reasons()


def test_table_maps_exactly_the_registered_codes() -> None:
    codes = registered()
    assert len(codes) > 150
    missing = sorted(set(codes) - set(STATUS))
    stale = sorted(set(STATUS) - set(codes))
    assert not missing, f"registered codes without an HTTP status: {missing}"
    assert not stale, f"statuses for codes nobody registers: {stale}"
    assert set(STATUS.values()) <= ALLOWED


def test_load_bearing_statuses() -> None:
    assert STATUS["schedule.not_found"] == 404
    assert STATUS["schedule.lifecycle.stale_revision"] == 409
    assert STATUS["schedule.auth.scope_required"] == 403
    assert STATUS["schedule.http.idempotency_key_required"] == 400
    assert STATUS["schedule.http.body_too_large"] == 413
    assert STATUS["schedule.cadence.unknown_field"] == 422
    assert STATUS["schedule.http.unauthenticated"] == 401
    # Every client-input family is a 4xx: bad input is never a server error.
    for code, status in STATUS.items():
        area = code.split(".")[1]
        if area in {"cadence", "limits", "revision", "validation", "patch", "page"}:
            assert 400 <= status < 500, code


def test_unlisted_code_falls_back_on_its_class() -> None:
    assert status_of(NotFoundError("schedule.future.thing", "x")) == 404
    assert status_of(ValidationError("schedule.future.thing", "x")) == 422
    assert status_of(SchedulingError("schedule.future.thing", "x")) == 500


def test_server_errors_keep_code_not_details() -> None:
    response = scheduling_error_response(
        SchedulingError("schedule.event.invalid_field", "payload had secret x", {"v": "x"})
    )
    assert response.status_code == 500
    assert b"secret" not in response.body
    assert b'"details":{}' in response.body
