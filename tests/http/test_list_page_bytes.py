"""``GET /v1/schedules`` answers the bytes the response models gave (ADR 2650).

The list page is built from its rows as values (the SELECT by position, a summary
tuple, the id as asyncpg's text, a preview flattened from a prefix); its bytes must be
the ones the old encoder wrote: ``SchedulePage`` of ``ScheduleSummaryOut``
(``model_dump_json``, what FastAPI's ``response_model`` sent), built here from each
schedule's fully validated domain values read by the admin login (``Schedule``,
``ScheduleRevision.from_definition``), the cadence as the stored JSON decodes, and the
preview by its definition over the whole instruction. The page varies everything a
row shows: every cadence kind, both pause reasons, a cancelled row (no
``next_fire_at``), microseconds and none, unicode, quotes and control characters in
titles, long instructions whose prefix flattens long enough and one whose prefix is
mostly whitespace. The test of the test plants plausible wrong encoders and sees each
refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from scheduling.adapters.postgres.repositories.schedules import schedule_by_name
from scheduling.domain.revision import ScheduleRevision
from scheduling.http import encoding
from scheduling.http.models import SchedulePage, ScheduleSummaryOut
from scheduling.service import values
from simulation.worlds.http import OWNER, HttpWorld, http_world

CIVIL = {"local_time": "09:00", "timezone": "Europe/Paris"}
CADENCES: list[dict[str, Any]] = [
    {"kind": "ONCE", "at": "2030-05-01T09:00:00.5+02:00"},
    {"kind": "DAILY", **CIVIL},
    {"kind": "WEEKLY", "local_time": "06:30", "timezone": "Asia/Tokyo", "weekdays": [1, 7]},
    {"kind": "MONTHLY", **CIVIL, "days_of_month": [31]},
    {"kind": "MONTHLY", **CIVIL, "last_day": True},
    {"kind": "YEARLY", **CIVIL, "dates": [{"month": 2, "day": 29}, {"month": 12, "day": 24}]},
]
TITLES = [
    'Ünïcode "quoted" \\ tab\t ctl\x01 \u2028 😀',
    "Ordinary",
    "日本語のタイトル",
    "</script>&amp;",
    "x" * 190,
    "émoji 🧪",
]
INSTRUCTIONS = [
    "Summarize the overnight news about the projects I follow.",
    # Longer than the preview's prefix; the prefix alone flattens long enough.
    "word\u00a0" * 150 + " tail",
    # Longer than the prefix, which is mostly whitespace: the whole text is flattened.
    " \n\t" * 200 + "late words after a long blank start " * 10,
    "line one\r\nline two\u2028line three\u3000full-width space " * 30,
    "short",
    "a" * 119 + " b",
]


def _old_preview(instruction: str, limit: int = values.PREVIEW_CHARS) -> str:
    # The preview's definition (before ADR 2650), over the whole instruction.
    flat = " ".join(instruction.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


async def _populate(world: HttpWorld) -> None:
    ids = []
    for n in range(14):
        answer = await world.create(
            f"bytes-{n}",
            title=TITLES[n % len(TITLES)] + f" {n}",
            instruction=INSTRUCTIONS[n % len(INSTRUCTIONS)],
            cadence=CADENCES[n % len(CADENCES)],
        )
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
        world.clock.advance(1 + n * 0.001001)
    paused = await world.call(
        "POST", f"/v1/schedules/{ids[2]}/pause", OWNER, json={"expected_revision": 1}
    )
    assert paused.status_code == 200, paused.text
    cancelled = await world.call(
        "DELETE", f"/v1/schedules/{ids[3]}", OWNER, params={"expected_revision": 1}
    )
    assert cancelled.status_code == 200, cancelled.text
    # The scheduler's pause (no HTTP route gives it), with a whole-second updated_at.
    await world.sql(
        "UPDATE schedules SET state = 'PAUSED', pause_reason = 'failure_limit',"
        " next_fire_at = NULL, consecutive_failures = 2,"
        " updated_at = date_trunc('second', updated_at) + interval '3 hours'"
        " WHERE id = CAST(:id AS uuid)",
        id=ids[4],
    )


async def _expected(world: HttpWorld, limit: int, next_cursor: str | None) -> bytes:
    """The old encoder's page: the models, from each row's validated domain values."""
    rows = await world.sql(
        "SELECT s.*, r.definition AS revision_definition,"
        " r.created_by_principal_id AS revision_author, r.created_at AS revision_at"
        " FROM schedules s JOIN schedule_revisions r"
        " ON r.schedule_id = s.id AND r.revision = s.current_revision"
        " WHERE s.tenant_id = :tenant AND s.principal_id = :principal"
        " ORDER BY s.updated_at DESC, s.id DESC LIMIT :limit",
        tenant=OWNER.tenant_id,
        principal=OWNER.principal_id,
        limit=limit,
    )
    items = []
    for row in rows:
        schedule = schedule_by_name(row)
        revision = ScheduleRevision.from_definition(
            schedule.id,
            schedule.current_revision,
            row["revision_author"],
            row["revision_at"],
            row["revision_definition"],
        )
        items.append(
            ScheduleSummaryOut(
                id=schedule.id,
                title=revision.title,
                state=schedule.state.value,
                pause_reason=None if schedule.pause_reason is None else schedule.pause_reason.value,
                current_revision=schedule.current_revision,
                next_fire_at=schedule.next_fire_at,
                cadence=row["revision_definition"]["cadence"],
                instruction_preview=_old_preview(revision.instruction),
                created_at=schedule.created_at,
                updated_at=schedule.updated_at,
            )
        )
    return SchedulePage(items=items, next_cursor=next_cursor).model_dump_json().encode()


async def _pages_equal(world: HttpWorld) -> bool:
    """Every page size's bytes (the full page, and a cut one with a cursor) against the
    old encoder's; a state-filtered and a cursor page take the compiled query."""
    equal = True
    for limit in (50, 5):
        answer = await world.call("GET", "/v1/schedules", OWNER, params={"limit": limit})
        assert answer.status_code == 200, answer.text
        cursor = answer.json()["next_cursor"]
        assert (cursor is None) == (limit == 50)
        equal = equal and answer.content == await _expected(world, limit, cursor)
    rest = await world.call("GET", "/v1/schedules", OWNER, params={"limit": 50, "cursor": cursor})
    assert rest.status_code == 200, rest.text
    everything = json.loads(await _expected(world, 50, None))["items"]
    equal = equal and json.loads(rest.content)["items"] == everything[5:]
    paused = await world.call("GET", "/v1/schedules", OWNER, params={"state": "PAUSED"})
    assert paused.status_code == 200, paused.text
    wanted = [i for i in everything if i["state"] == "PAUSED"]
    assert {i["pause_reason"] for i in wanted} == {"user", "failure_limit"}
    return equal and json.loads(paused.content)["items"] == wanted


async def test_the_list_page_is_the_models_bytes(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        await _populate(world)
        assert await _pages_equal(world)


def _drop_pause_reason(s: Any) -> Any:
    row = dict(REAL_ROW(s))
    del row["pause_reason"]
    return row


def _uuid_upper(s: Any) -> Any:
    return {**REAL_ROW(s), "id": str(s.schedule_id).upper()}


def _cadence_sorted(s: Any) -> Any:
    return {**REAL_ROW(s), "cadence": dict(sorted(s.cadence.items()))}


def _head_only(instruction: str, limit: int = values.PREVIEW_CHARS) -> str:
    # A preview trusting its prefix always (no whole-text fallback).
    return _old_preview(instruction[: values.PREVIEW_HEAD * limit], limit)


REAL_ROW = encoding.summary_row
WRONG: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "dropped pause_reason": (encoding, "summary_row", _drop_pause_reason),
    "upper-case id": (encoding, "summary_row", _uuid_upper),
    "cadence keys sorted": (encoding, "summary_row", _cadence_sorted),
    "preview of the prefix alone": (values, "preview", _head_only),
}


@contextmanager
def _planted(name: str) -> Iterator[None]:
    module, attribute, wrong = WRONG[name]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, attribute, wrong)
        yield


@pytest.mark.parametrize("name", sorted(WRONG))
async def test_of_the_test_a_wrong_encoder_is_refused(pg_url: str, name: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        await _populate(world)
        with _planted(name):
            assert not await _pages_equal(world)
