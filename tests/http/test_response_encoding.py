"""The hot routes' bytes (http/encoding.py, ADR 2400) equal what FastAPI rendered from
the response models: the same keys in the same order, the same UUID, datetime (``Z``,
microseconds, other offsets), text and nested-object forms, and no serializer warning.

The models' ``model_dump_json`` is what FastAPI's ``response_model`` path sent
(``field.serialize_json``: the same pydantic-core serializer), so each case encodes one
set of values both ways and compares the bytes. The values are plain namespaces: both
paths only read attributes.
"""

from __future__ import annotations

import json
import warnings
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest

from scheduling.domain.schedule import ScheduleState
from scheduling.http import encoding
from scheduling.http.models import (
    OccurrenceOut,
    OccurrencePage,
    ScheduleDetailOut,
    ScheduleOut,
    SchedulePage,
    ScheduleSummaryOut,
)

T0 = datetime(2026, 12, 2, 19, 0, tzinfo=UTC)
T1 = datetime(2026, 12, 2, 19, 0, 0, 123456, tzinfo=UTC)
T2 = datetime(2026, 12, 3, 8, 30, tzinfo=timezone(timedelta(hours=2)))
SID = UUID("7d1f8a4e-2b3c-4d5e-8f60-718293a4b5c6")
AGENT = UUID("00000000-0000-4000-8000-000000000001")
TITLE = 'Ünïcode "quoted" \\ tab\t nl\n ctl\x01 \u2028 😀'
CADENCE: dict[str, Any] = {"kind": "weekly", "days": ["MON", "FRI"], "at": "09:00", "n": 3}


class Limits:
    def to_json(self) -> dict[str, Any]:
        return {
            "max_steps": 10,
            "max_model_calls": 5,
            "max_tool_calls": 7,
            "max_cost": "1.50",
            "reserve_steps": 0,
            "reserve_model_calls": 1,
            "reserve_cost": "0",
        }


def _schedule(*, paused: bool, next_fire_at: datetime | None) -> Any:
    return SimpleNamespace(
        id=SID,
        state=ScheduleState.PAUSED if paused else ScheduleState.ACTIVE,
        pause_reason=SimpleNamespace(value="USER") if paused else None,
        current_revision=3,
        next_fire_at=next_fire_at,
        consecutive_failures=2,
        created_at=T0,
        updated_at=T1,
    )


def _revision(*, timezone_name: str | None) -> Any:
    return SimpleNamespace(
        schedule_id=SID,
        revision=3,
        title=TITLE,
        instruction="do the thing " * 20,
        agent_id=AGENT,
        agent_version="v1",
        policy_profile="default",
        requested_scopes=frozenset({"b.read", "a.write"}),
        browser_profile_id=None,
        limits=Limits(),
        run_timeout_seconds=600,
        cadence=CADENCE,
        timezone=timezone_name,
        misfire_grace_seconds=60,
        max_consecutive_failures=5,
        created_by_principal_id="principal-1",
        created_at=T2,
    )


CASES = [
    (False, T1, "Europe/Berlin"),
    (True, None, None),
    (False, T2, None),
]


@pytest.fixture(autouse=True)
def _warnings_fail() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize(("paused", "next_fire_at", "tz"), CASES)
@pytest.mark.parametrize("replayed", [False, True])
def test_schedule_body_bytes(
    paused: bool, next_fire_at: datetime | None, tz: str | None, replayed: bool
) -> None:
    s, r = _schedule(paused=paused, next_fire_at=next_fire_at), _revision(timezone_name=tz)
    expected = ScheduleOut.of(s, r, replayed=replayed).model_dump_json().encode()
    assert encoding.schedule_body(s, r, replayed=replayed) == expected


@pytest.mark.parametrize(("paused", "next_fire_at", "tz"), CASES)
def test_schedule_detail_bytes(paused: bool, next_fire_at: datetime | None, tz: str | None) -> None:
    s, r = _schedule(paused=paused, next_fire_at=next_fire_at), _revision(timezone_name=tz)
    expected = ScheduleDetailOut.of_read(s, r).model_dump_json().encode()
    assert encoding.schedule_detail(s, r) == expected


def _summary(i: int) -> Any:
    return SimpleNamespace(
        schedule_id=UUID(int=i),
        title=f"{TITLE} {i}",
        state="PAUSED" if i % 2 else "ACTIVE",
        pause_reason="USER" if i % 2 else None,
        current_revision=i + 1,
        next_fire_at=None if i % 3 == 0 else T1 + timedelta(minutes=i),
        cadence=dict(CADENCE),
        instruction_preview=f"preview {i} …",
        created_at=T0,
        updated_at=T2,
    )


@pytest.mark.parametrize(("rows", "cursor"), [(0, None), (1, "abc"), (50, "Y3Vyc29y")])
def test_schedule_page_bytes(rows: int, cursor: str | None) -> None:
    items = [_summary(i) for i in range(rows)]
    expected = SchedulePage(
        items=[ScheduleSummaryOut.of(item) for item in items], next_cursor=cursor
    ).model_dump_json()
    assert encoding.schedule_page(items, cursor) == expected.encode()


def _occurrence(i: int) -> Any:
    linked = i % 2 == 0
    occurrence = SimpleNamespace(
        id=UUID(int=1000 + i),
        schedule_id=SID,
        schedule_revision=2,
        nominal_fire_at=T0 + timedelta(hours=i),
        disposition=SimpleNamespace(value="MATERIALIZED" if linked else "MISSED"),
        session_id=UUID(int=2000 + i) if linked else None,
        run_id=UUID(int=3000 + i) if linked else None,
        reason_code=None if linked else "schedule.misfire.missed",
        materialized_at=T1 if linked else None,
        links_erased_at=T2 if i == 4 else None,
        created_at=T1,
    )
    run = SimpleNamespace(
        run_id=UUID(int=3000 + i),
        session_id=UUID(int=2000 + i),
        status="FAILED" if i % 4 == 0 else "SUCCEEDED",
        scheduled_for=T0,
        deadline_at=T2,
        finished_at=None if i == 2 else T1,
        failure={"code": "x.y", "nested": {"a": [1, 2]}} if i % 4 == 0 else None,
    )
    return SimpleNamespace(occurrence=occurrence, run=run if linked else None)


@pytest.mark.parametrize(("rows", "cursor"), [(0, None), (7, "next")])
def test_occurrence_page_bytes(rows: int, cursor: str | None) -> None:
    views = [_occurrence(i) for i in range(rows)]
    expected = OccurrencePage(
        items=[OccurrenceOut.of(v) for v in views], next_cursor=cursor
    ).model_dump_json()
    assert encoding.occurrence_page(views, cursor) == expected.encode()


def test_the_comparison_sees_order_and_form() -> None:
    """Test of the test: a key out of order, or a datetime as ``+00:00``, differs."""
    items = [_summary(1)]
    good = encoding.schedule_page(items, None)
    parsed = json.loads(good)
    row = parsed["items"][0]
    reordered = {"items": [dict(reversed(list(row.items())))], "next_cursor": None}
    assert json.dumps(reordered, separators=(",", ":"), ensure_ascii=False).encode() != good
    assert b"+00:00" not in good
    assert b"19:00:00.123456Z" in encoding.schedule_body(
        _schedule(paused=False, next_fire_at=T1), _revision(timezone_name=None)
    )
