"""gate.schedule.calendar_http_roundtrip: every calendar kind over a real HTTP server.

A real uvicorn server on a loopback port serves the control plane built through
``bootstrap.build_control_plane`` against PostgreSQL (API role, forced RLS, durable
directories). Daily, weekly, monthly and yearly definitions - including a DST gap, a
DST fold, a month without day 31, month-end and February 29 - are created with
``POST /v1/schedules`` and then replaced with ``PATCH`` by another kind. Every response
must carry the canonical cadence and the exact next civil instant, each compared with
the product calculator AND an independent brute-force reference
(``http_calendar_reference``); the point read must agree, revision 1 must stay
unchanged after the update, and revision 2 must exist. Every calendar-value defect (one
per registered ``schedule.cadence.*`` code) is rejected over HTTP with its own code by
both create and update, and writes nothing.

Tests of the test plant a server that returns the cadence un-canonicalized, one whose
next firing is off by an hour, and one that answers a defect with a generic code; the
check fails on each.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from gates.checks import http_calendar_reference as reference
from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.cadence import parse_cadence
from scheduling.domain.reasons import all_reasons
from scheduling.domain.recurrence.engine import next_after
from simulation.worlds.http import HttpWorld, http_world, planted, update_body

pytestmark = pytest.mark.postgres

GATE = "gate.schedule.calendar_http_roundtrip"


def utc(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


# (clock instant at creation, cadence as a client writes it): ordered by instant.
CASES: list[tuple[datetime, dict[str, Any]]] = [
    (utc(2026, 3, 2, 8), {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}),
    (
        utc(2026, 3, 7, 12),  # next 02:30 falls in the New York spring-forward gap
        {"kind": "DAILY", "local_time": "02:30", "timezone": "America/New_York"},
    ),
    (
        utc(2026, 3, 23, 0),  # Sunday 01:30 London falls in the 29 March gap
        {"kind": "WEEKLY", "local_time": "01:30", "weekdays": [7], "timezone": "Europe/London"},
    ),
    (
        utc(2026, 4, 1, 0),
        {
            "kind": "WEEKLY",
            "local_time": "23:59:59",
            "weekdays": [5, 1, 3],
            "timezone": "Asia/Tokyo",
        },
    ),
    (
        utc(2026, 4, 1, 0),  # April has no 31st: skipped to 31 May
        {
            "kind": "MONTHLY",
            "local_time": "12:00",
            "days_of_month": [31],
            "timezone": "America/Los_Angeles",
        },
    ),
    (
        utc(2026, 4, 2, 0),
        {
            "kind": "MONTHLY",
            "local_time": "18:00",
            "days_of_month": [],
            "last_day": True,
            "timezone": "Australia/Sydney",
        },
    ),
    (
        utc(2026, 4, 3, 0),
        {
            "kind": "YEARLY",
            "local_time": "08:00",
            "dates": [{"month": 2, "day": 29}],
            "timezone": "Europe/Berlin",
        },
    ),
    (
        utc(2026, 4, 4, 0),
        {
            "kind": "YEARLY",
            "local_time": "00:00",
            "dates": [{"month": 12, "day": 31}, {"month": 1, "day": 1}],
            "timezone": "Pacific/Auckland",
        },
    ),
    (
        utc(2026, 10, 31, 12),  # next 01:30 New York is ambiguous (fall back): earlier
        {"kind": "DAILY", "local_time": "01:30", "timezone": "America/New_York"},
    ),
]

# Update instants and replacement cadences (another kind for each created schedule).
UPDATES: list[dict[str, Any]] = [
    {
        "kind": "MONTHLY",
        "local_time": "07:15",
        "days_of_month": [30, 15],
        "last_day": True,
        "timezone": "America/Sao_Paulo",
    },
    {
        "kind": "YEARLY",
        "local_time": "09:30:15",
        "dates": [{"month": 11, "day": 1}],
        "timezone": "America/New_York",
    },
    {"kind": "DAILY", "local_time": "01:30", "timezone": "Europe/London"},
    {"kind": "WEEKLY", "local_time": "06:00", "weekdays": [2], "timezone": "Asia/Kolkata"},
    {"kind": "DAILY", "local_time": "02:30", "timezone": "Europe/Berlin"},
    {"kind": "WEEKLY", "local_time": "10:00", "weekdays": [6, 7], "timezone": "UTC"},
    {
        "kind": "MONTHLY",
        "local_time": "00:30",
        "days_of_month": [29],
        "timezone": "Australia/Lord_Howe",
    },
    {"kind": "DAILY", "local_time": "12:00", "timezone": "Pacific/Kiritimati"},
    {
        "kind": "YEARLY",
        "local_time": "01:30",
        "dates": [{"month": 11, "day": 7}],
        "timezone": "America/Havana",
    },
]
UPDATE_AT = utc(2026, 11, 1, 3)


def defect(kind: str = "DAILY", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"kind": kind, "local_time": "09:00", "timezone": "Europe/Paris"}
    if kind == "WEEKLY":
        base["weekdays"] = [1]
    if kind == "MONTHLY":
        base["days_of_month"] = [1]
    if kind == "YEARLY":
        base["dates"] = [{"month": 1, "day": 1}]
    base.update(fields)
    return {k: v for k, v in base.items() if v is not ...}


DEFECTS: list[tuple[str, Any]] = [
    ("schedule.cadence.not_an_object", "DAILY 09:00"),
    ("schedule.cadence.unknown_kind", defect("HOURLY")),
    ("schedule.cadence.unknown_field", defect(every=2)),
    ("schedule.cadence.missing_field", defect(timezone=...)),
    ("schedule.cadence.invalid_type", defect("WEEKLY", weekdays="1,2")),
    ("schedule.cadence.invalid_local_time", defect(local_time="25:00")),
    ("schedule.cadence.invalid_timezone", defect(timezone="Mars/Olympus_Mons")),
    ("schedule.cadence.weekday_duplicate", defect("WEEKLY", weekdays=[1, 1])),
    ("schedule.cadence.weekday_out_of_range", defect("WEEKLY", weekdays=[8])),
    ("schedule.cadence.weekdays_empty", defect("WEEKLY", weekdays=[])),
    ("schedule.cadence.day_duplicate", defect("MONTHLY", days_of_month=[3, 3])),
    ("schedule.cadence.day_out_of_range", defect("MONTHLY", days_of_month=[32])),
    (
        "schedule.cadence.monthly_selector_empty",
        defect("MONTHLY", days_of_month=[], last_day=False),
    ),
    (
        "schedule.cadence.yearly_date_duplicate",
        defect("YEARLY", dates=[{"month": 5, "day": 1}, {"month": 5, "day": 1}]),
    ),
    ("schedule.cadence.yearly_date_impossible", defect("YEARLY", dates=[{"month": 4, "day": 31}])),
    ("schedule.cadence.yearly_day_out_of_range", defect("YEARLY", dates=[{"month": 1, "day": 0}])),
    ("schedule.cadence.month_out_of_range", defect("YEARLY", dates=[{"month": 13, "day": 1}])),
    ("schedule.cadence.yearly_selector_empty", defect("YEARLY", dates=[])),
    ("schedule.cadence.naive_instant", {"kind": "ONCE", "at": "2026-12-01T09:00:00"}),
    ("schedule.cadence.invalid_instant", {"kind": "ONCE", "at": "tomorrow at nine"}),
]


def expect_firing(payload: dict[str, Any], now: datetime) -> datetime:
    """The next firing by the product calculator, which must equal the reference."""
    product = next_after(parse_cadence(payload), now)
    independent = reference.next_after(payload, now)
    assert product == independent, (payload, now, product, independent)
    assert product is not None
    return product


def check_response(response_json: dict[str, Any], payload: dict[str, Any], now: datetime) -> None:
    canonical = reference.canonical(payload)
    assert canonical == parse_cadence(payload).to_payload(), payload
    assert response_json["cadence"] == canonical, (response_json["cadence"], canonical)
    assert response_json["timezone"] == payload["timezone"]
    fire = datetime.fromisoformat(response_json["next_fire_at"])
    assert fire == expect_firing(payload, now), (payload, now, fire)


async def roundtrip(world: HttpWorld) -> dict[str, Any]:
    """Create every case, update each by another kind; raises AssertionError on a defect."""
    created: list[tuple[str, dict[str, Any]]] = []
    fires: list[str] = []
    for n, (at, payload) in enumerate(CASES):
        world.clock.advance_to(max(at, world.clock.now()))
        response = await world.create(f"cal-{n}", cadence=payload)
        assert response.status_code == 201, response.text
        check_response(response.json(), payload, world.clock.now())
        sid = response.json()["id"]
        read = await world.call("GET", f"/v1/schedules/{sid}")
        assert read.status_code == 200, read.text
        assert read.json()["cadence"] == response.json()["cadence"]
        assert read.json()["revision"]["cadence"] == response.json()["cadence"]
        assert read.json()["next_fire_at"] == response.json()["next_fire_at"]
        created.append((sid, payload))
        fires.append(response.json()["next_fire_at"])
    world.clock.advance_to(UPDATE_AT)
    for (sid, original), replacement in zip(created, UPDATES, strict=True):
        detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
        response = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, cadence=replacement)
        )
        assert response.status_code == 200, response.text
        assert response.json()["current_revision"] == 2
        check_response(response.json(), replacement, world.clock.now())
        revisions = await world.sql(
            "SELECT revision, definition FROM schedule_revisions WHERE schedule_id = :s"
            " ORDER BY revision",
            s=sid,
        )
        assert [r["revision"] for r in revisions] == [1, 2]
        assert revisions[0]["definition"]["cadence"] == reference.canonical(original)
        assert revisions[1]["definition"]["cadence"] == reference.canonical(replacement)
    return {"created": len(created), "updated": len(created), "next_fire_at": fires}


async def rejects_defects(world: HttpWorld) -> list[str]:
    """Every defect on create and on update: its code, 422, nothing written."""
    target = await world.create("defect-target")
    assert target.status_code == 201, target.text
    sid = target.json()["id"]
    detail = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    exercised = []
    for n, (code, cadence) in enumerate(DEFECTS):
        before = await world.counts()
        created = await world.create(f"defect-{n}", cadence=cadence)
        updated = await world.call(
            "PATCH", f"/v1/schedules/{sid}", json=update_body(detail, cadence=cadence)
        )
        for response in (created, updated):
            assert response.status_code == 422, (code, response.status_code, response.text)
            assert response.json()["error"]["code"] == code, (code, response.text)
        assert await world.counts() == before, code
        exercised.append(code)
    after = (await world.call("GET", f"/v1/schedules/{sid}")).json()
    assert (after["current_revision"], after["updated_at"]) == (1, detail["updated_at"])
    return exercised


@pytest.mark.gate(GATE)
async def test_every_calendar_kind_round_trips_over_http(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with http_world(pg_url) as world:
        evidence = await roundtrip(world)
        exercised = await rejects_defects(world)
    registered = {c for c in all_reasons() if c.startswith("schedule.cadence.")}
    missing = registered - set(exercised)
    assert not missing, f"cadence codes never exercised over HTTP: {sorted(missing)}"
    gate_evidence.record("server", "uvicorn on 127.0.0.1 (ephemeral port), PostgreSQL API role")
    gate_evidence.record(
        "kinds", sorted({p["kind"] for _, p in CASES} | {u["kind"] for u in UPDATES})
    )
    gate_evidence.record("round_trips", evidence)
    gate_evidence.record("reference", "brute-force local-date walk with zoneinfo + calculator")
    gate_evidence.record("defects_rejected", exercised)


# ------------------------------------------------------------- tests of the test


def _schedule_response(method: str, path: str) -> bool:
    return method in {"POST", "PATCH"} and path.startswith("/v1/schedules")


def uncanonical(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    if _schedule_response(method, path) and isinstance(body.get("cadence"), dict):
        cadence = dict(body["cadence"])
        cadence["local_time"] = str(cadence["local_time"])[:5]
        return {**body, "cadence": cadence}
    return body


def hour_off(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    if _schedule_response(method, path) and body.get("next_fire_at"):
        fire = datetime.fromisoformat(body["next_fire_at"]).replace(minute=59)
        return {**body, "next_fire_at": fire.isoformat()}
    return body


def generic_codes(method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    error = body.get("error")
    if isinstance(error, dict) and str(error.get("code", "")).startswith("schedule.cadence."):
        return {"error": {**error, "code": "schedule.http.invalid_request"}}
    return body


@pytest.mark.parametrize("plant", [uncanonical, hour_off], ids=["uncanonical", "hour_off"])
async def test_check_fails_on_a_wrong_round_trip(pg_url: str, plant: Any) -> None:
    async with http_world(pg_url, app_factory=planted(plant)) as world:
        with pytest.raises(AssertionError):
            await roundtrip(world)


async def test_check_fails_on_a_generic_defect_code(pg_url: str) -> None:
    async with http_world(pg_url, app_factory=planted(generic_codes)) as world:
        with pytest.raises(AssertionError):
            await rejects_defects(world)
