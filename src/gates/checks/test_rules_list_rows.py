"""rule.http.list_rows: every list row says what the point read says, with a bounded preview.

The list is encoded on its own path (ADR 2400: rows built from the listing's values,
not from the point read's models), so a row could drift from the schedule it names (a
field dropped to null, the first revision's title after an update, a preview that is
the whole instruction) while the filters' and paging's checks stay green. Here several
schedules (daily, weekly, paused, cancelled, updated to a second revision, a long
instruction with runs of whitespace) are listed page by page and each row is compared
field by field with that schedule's point read.

Tests of the test: ``scheduling-gates mutate`` (``encoding.list_row_next_fire_dropped``,
``encoding.list_row_preview_whole``,
``schedules.list_rows_first_revision``).
"""

from __future__ import annotations

from typing import Any

import pytest

from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body

# The point read's fields a row repeats (spec "Native Apple schedule browser": title,
# state, cadence, next_fire_at; the tool summary's allow-list adds the rest).
SHARED = (
    "id",
    "title",
    "state",
    "pause_reason",
    "current_revision",
    "next_fire_at",
    "cadence",
    "created_at",
    "updated_at",
)
# What a row never carries (spec: list responses return metadata and a bounded preview).
NEVER = ("instruction", "revision", "limits", "requested_scopes", "policy_profile")
PREVIEW_MAX = 120
LONG = "Read   the overnight\tnews,\n then " + "summarize each project I follow briefly; " * 8
WEEKLY = {"kind": "WEEKLY", "local_time": "06:30", "weekdays": [2, 5], "timezone": "Asia/Tokyo"}


async def _made(world: HttpWorld) -> dict[str, str]:
    """Schedule id -> its complete instruction, in several states and revisions."""
    instructions: dict[str, str] = {}
    plan: list[tuple[str, dict[str, Any]]] = [
        ("daily", {}),
        ("weekly", {"cadence": WEEKLY, "title": "Weekly digest"}),
        ("long", {"instruction": LONG, "title": "Long one"}),
        ("paused", {"title": "To pause"}),
        ("cancelled", {"title": "To cancel"}),
        ("updated", {"title": "First title"}),
    ]
    for key, overrides in plan:
        created = await world.create(f"rows-{key}", OWNER, **overrides)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        instructions[sid] = body(**overrides)["instruction"]
        world.clock.advance(1)
        if key == "paused":
            done = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", OWNER, json={"expected_revision": 1}
            )
        elif key == "cancelled":
            done = await world.call(
                "DELETE", f"/v1/schedules/{sid}", OWNER, params={"expected_revision": 1}
            )
        elif key == "updated":
            detail = (await world.call("GET", f"/v1/schedules/{sid}", OWNER)).json()
            done = await world.call(
                "PATCH",
                f"/v1/schedules/{sid}",
                OWNER,
                json=update_body(detail, title="Second title", cadence=WEEKLY),
            )
        else:
            continue
        assert done.status_code == 200, done.text
        world.clock.advance(1)
    return instructions


def _expected_preview(instruction: str) -> str:
    flat = " ".join(instruction.split())
    return flat if len(flat) <= PREVIEW_MAX else flat[: PREVIEW_MAX - 1].rstrip() + "\u2026"


async def list_rows(world: HttpWorld) -> dict[str, Any]:
    instructions = await _made(world)
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = await world.call("GET", "/v1/schedules", OWNER, params=params)
        assert page.status_code == 200, page.text
        rows.extend(page.json()["items"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
        assert len(rows) < 50, "the cursor never ends"
    assert sorted(r["id"] for r in rows) == sorted(instructions), rows
    kinds: set[tuple[str, bool, int]] = set()
    for row in rows:
        point = await world.call("GET", f"/v1/schedules/{row['id']}", OWNER)
        assert point.status_code == 200, point.text
        read = point.json()
        for name in SHARED:
            assert row[name] == read[name], (name, row, read)
        leaked = [name for name in NEVER if name in row]
        assert not leaked, ("a row carries", leaked, row)
        instruction = instructions[row["id"]]
        assert read["revision"]["instruction"] == instruction, read
        assert row["instruction_preview"] == _expected_preview(instruction), row
        assert len(row["instruction_preview"]) <= PREVIEW_MAX, row
        kinds.add((row["state"], row["next_fire_at"] is None, row["current_revision"]))
    long_rows = [r for r in rows if instructions[r["id"]] == LONG]
    assert len(long_rows) == 1, rows
    assert long_rows[0]["instruction_preview"] != LONG, long_rows
    # The world holds what the comparison must tell apart: a paused row, a cancelled row
    # without a next fire, an active row at its second revision.
    assert any(state == "PAUSED" for state, _, _ in kinds), kinds
    assert ("CANCELLED", True, 1) in kinds, kinds
    assert ("ACTIVE", False, 2) in kinds, kinds
    return {"rows": len(rows)}


@pytest.mark.rule("rule.http.list_rows")
async def test_every_list_row_agrees_with_its_point_read(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        evidence = await list_rows(world)
    assert evidence["rows"] == 6
