"""rule.http.list_rows: every list row says what the point read says, with a bounded preview.

The list is encoded on its own path (ADR 2400: rows built from the listing's values,
not from the point read's models), so a row could drift from the schedule it names (a
field dropped to null, the first revision's title after an update, a preview that is
the whole instruction) while the filters' and paging's checks stay green. Here several
schedules (daily, weekly, paused, cancelled, updated to a second revision, a long
instruction with runs of whitespace) are listed page by page and each row is compared
field by field with that schedule's point read.

Three callers own schedules: the owner, another principal of its tenant and a principal
of another tenant with the owner's principal id (so a check of the principal id alone
would mix them; ADR 2610). Each caller's pages must hold exactly its own schedules: no
other caller's row, none missing, none twice, each equal to that caller's point read.

Tests of the test: ``scheduling-gates mutate`` (``encoding.list_row_next_fire_dropped``,
``encoding.list_row_preview_whole``, ``schedules.list_rows_first_revision``,
``schedules.list_join_ignores_schedule_id``) and, here, a server whose first list page
is cached by URL alone (``test_check_fails_on_a_caller_blind_page_cache``).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.bootstrap import ControlPlane
from scheduling.domain.identity import Principal
from scheduling.http.app import create_app
from simulation.worlds.http import OWNER, HttpWorld, body, http_world, update_body
from simulation.worlds.service import principal

# Row-level security already confines the API role to one principal's rows, so these
# callers test the list end to end; the repository's own owner predicate is the
# repository contract's to prove (schedules.get_current_ignores_owner and kin).
SAME_TENANT = principal("rows-same-tenant", scopes=OWNER.scopes)
OTHER_TENANT = principal(OWNER.principal_id, tenant_id="tenant-rows-b", scopes=OWNER.scopes)
CALLERS = (OWNER, SAME_TENANT, OTHER_TENANT)

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


Plan = list[tuple[str, dict[str, Any]]]
PLANS: dict[Principal, Plan] = {
    OWNER: [
        ("daily", {}),
        ("weekly", {"cadence": WEEKLY, "title": "Weekly digest"}),
        ("long", {"instruction": LONG, "title": "Long one"}),
        ("paused", {"title": "To pause"}),
        ("cancelled", {"title": "To cancel"}),
        ("updated", {"title": "First title"}),
    ],
    # Every caller has a schedule at its second revision and several at their first, so
    # a revision joined by number alone would pair rows with others' revisions.
    SAME_TENANT: [
        ("daily", {"title": "Same tenant daily"}),
        ("updated", {"title": "Same tenant first"}),
        ("paused", {"title": "Same tenant paused"}),
    ],
    OTHER_TENANT: [
        ("daily", {"title": "Other tenant daily"}),
        ("weekly", {"cadence": WEEKLY, "title": "Other tenant weekly"}),
        ("updated", {"title": "Other tenant first"}),
        ("cancelled", {"title": "Other tenant cancelled"}),
    ],
}


async def _made(world: HttpWorld, who: Principal) -> dict[str, str]:
    """Schedule id -> its complete instruction: ``who``'s plan, in several states and
    revisions."""
    instructions: dict[str, str] = {}
    for key, overrides in PLANS[who]:
        created = await world.create(f"rows-{key}", who, **overrides)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        instructions[sid] = body(**overrides)["instruction"]
        world.clock.advance(1)
        if key == "paused":
            done = await world.call(
                "POST", f"/v1/schedules/{sid}/pause", who, json={"expected_revision": 1}
            )
        elif key == "cancelled":
            done = await world.call(
                "DELETE", f"/v1/schedules/{sid}", who, params={"expected_revision": 1}
            )
        elif key == "updated":
            detail = (await world.call("GET", f"/v1/schedules/{sid}", who)).json()
            done = await world.call(
                "PATCH",
                f"/v1/schedules/{sid}",
                who,
                json=update_body(detail, title=f"{detail['title']} (second)", cadence=WEEKLY),
            )
        else:
            continue
        assert done.status_code == 200, done.text
        world.clock.advance(1)
    return instructions


def _expected_preview(instruction: str) -> str:
    flat = " ".join(instruction.split())
    return flat if len(flat) <= PREVIEW_MAX else flat[: PREVIEW_MAX - 1].rstrip() + "\u2026"


async def _pages(world: HttpWorld, who: Principal) -> list[dict[str, Any]]:
    """Every row of ``who``'s list, page by page (2 a page), in the order served."""
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = await world.call("GET", "/v1/schedules", who, params=params)
        assert page.status_code == 200, page.text
        rows.extend(page.json()["items"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return rows
        assert len(rows) < 50, "the cursor never ends"


async def _own_rows(
    world: HttpWorld, who: Principal, instructions: dict[str, str], others: set[str]
) -> list[dict[str, Any]]:
    """``who``'s rows, checked to be exactly its schedules, each equal to its point read."""
    rows = await _pages(world, who)
    ids = [r["id"] for r in rows]
    caller = (who.tenant_id, who.principal_id)
    foreign = [sid for sid in ids if sid in others]
    assert not foreign, ("another caller's row in the list of", caller, foreign)
    twice = sorted({sid for sid in ids if ids.count(sid) > 1})
    assert not twice, ("a row listed more than once for", caller, twice)
    missing = sorted(set(instructions) - set(ids))
    assert not missing, ("a schedule missing from the list of", caller, missing)
    assert sorted(ids) == sorted(instructions), (caller, rows)
    for row in rows:
        point = await world.call("GET", f"/v1/schedules/{row['id']}", who)
        assert point.status_code == 200, point.text
        read = point.json()
        for name in SHARED:
            assert row[name] == read[name], (caller, name, row, read)
        leaked = [name for name in NEVER if name in row]
        assert not leaked, ("a row carries", leaked, row)
        instruction = instructions[row["id"]]
        assert read["revision"]["instruction"] == instruction, read
        assert row["instruction_preview"] == _expected_preview(instruction), row
        assert len(row["instruction_preview"]) <= PREVIEW_MAX, row
    # The check could not tell a revision joined by number alone from the right one
    # unless each caller holds both revision numbers.
    assert {r["current_revision"] for r in rows} == {1, 2}, (caller, rows)
    return rows


async def list_rows(world: HttpWorld) -> dict[str, Any]:
    owned: dict[Principal, dict[str, str]] = {}
    for who in CALLERS:
        owned[who] = await _made(world, who)
    listed: dict[Principal, list[dict[str, Any]]] = {}
    for who in CALLERS:
        others = {sid for other, mine in owned.items() if other != who for sid in mine}
        listed[who] = await _own_rows(world, who, owned[who], others)
    rows = listed[OWNER]
    instructions = owned[OWNER]
    kinds = {(r["state"], r["next_fire_at"] is None, r["current_revision"]) for r in rows}
    long_rows = [r for r in rows if instructions[r["id"]] == LONG]
    assert len(long_rows) == 1, rows
    assert long_rows[0]["instruction_preview"] != LONG, long_rows
    # The world holds what the comparison must tell apart: a paused row, a cancelled row
    # without a next fire, an active row at its second revision.
    assert any(state == "PAUSED" for state, _, _ in kinds), kinds
    assert ("CANCELLED", True, 1) in kinds, kinds
    assert ("ACTIVE", False, 2) in kinds, kinds
    return {
        "rows": len(rows),
        "rows_by_caller": {f"{w.principal_id}@{w.tenant_id}": len(r) for w, r in listed.items()},
    }


@pytest.mark.rule("rule.http.list_rows")
async def test_every_list_row_agrees_with_its_point_read(pg_url: str) -> None:
    async with http_world(pg_url, CALLERS) as world:
        evidence = await list_rows(world)
    assert evidence["rows"] == 6
    assert sorted(evidence["rows_by_caller"].values()) == [3, 4, 6], evidence


# ------------------------------------------------------------- tests of the test


class CallerBlindPageCache:
    """A plausible wrong server: the list's responses cached by URL (path and query)
    without the caller, as a shared cache that ignores ``Authorization`` would. The
    second caller asking for ``?limit=2`` is served the owner's first page."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.cache: dict[bytes, list[Any]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        listing = (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"] == "/v1/schedules"
        )
        if not listing:
            await self.app(scope, receive, send)
            return
        key = scope["query_string"]
        if key in self.cache:
            for message in self.cache[key]:
                await send(message)
            return
        sent: list[Any] = []

        async def keep(message: Any) -> None:
            sent.append(message)
            await send(message)

        await self.app(scope, receive, keep)
        self.cache[key] = sent


def caller_blind(plane: ControlPlane) -> Any:
    return CallerBlindPageCache(create_app(plane))


async def test_check_fails_on_a_caller_blind_page_cache(pg_url: str) -> None:
    async with http_world(pg_url, CALLERS, app_factory=caller_blind) as world:
        with pytest.raises(AssertionError, match="another caller's row"):
            await list_rows(world)
