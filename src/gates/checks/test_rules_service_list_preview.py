"""rule.http.list_rows over HTTP against PostgreSQL: the preview of long instructions.

``test_rules_list_rows`` lists one long instruction of a few hundred characters; the
product flattens only a head of a long instruction (four times the preview's length)
when that head alone flattens past the limit. Instructions on both sides of that head
- 480 and 481 characters, 2,000, and 20,000 characters (the longest accepted), one
opening with long whitespace runs so the head flattens shorter than the preview, one
whose cut falls on a space, one whose words are parted by blank lines and tabs - each
list with the whitespace-folded instruction cut to 120 characters (119 and an
ellipsis, the trailing space dropped), never longer, never the whole instruction.

Tests of the test: ``scheduling-gates mutate`` (``svc.preview_long_head_overlong``,
``svc.preview_long_head_unfolded``).
"""

from __future__ import annotations

from typing import Any

import pytest

from simulation.worlds.http import OWNER, http_world

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.list_rows")]

PREVIEW_MAX = 120
WORDS = "summarize each project I follow briefly and note what changed overnight "


def words(length: int) -> str:
    text = (WORDS * (length // len(WORDS) + 1))[:length]
    return text[:-1] + "x"  # no trailing whitespace: the length is the folded length too


INSTRUCTIONS: dict[str, str] = {
    "head_exactly": words(480),
    "head_plus_one": words(481),
    "long": words(2000),
    "longest": words(20000),
    "blank_head": " \n\t" * 200 + words(600),
    "cut_on_space": "a" * 118 + " " + "b" * 400 + " " + words(200),
    "folded_runs": "\n\n\t  ".join(words(60) for _ in range(20)),
}


def expected(instruction: str) -> str:
    flat = " ".join(instruction.split())
    return flat if len(flat) <= PREVIEW_MAX else flat[: PREVIEW_MAX - 1].rstrip() + "\u2026"


async def test_long_instructions_list_a_bounded_folded_preview(pg_url: str) -> None:
    async with http_world(pg_url, [OWNER]) as world:
        ids: dict[str, str] = {}
        for key, instruction in INSTRUCTIONS.items():
            created = await world.create(f"preview-{key}", instruction=instruction, title=key)
            assert created.status_code == 201, (key, created.text)
            ids[created.json()["id"]] = key
        rows: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 100}
            if cursor is not None:
                params["cursor"] = cursor
            page = await world.call("GET", "/v1/schedules", params=params)
            assert page.status_code == 200, page.text
            rows.extend(page.json()["items"])
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
        assert sorted(r["id"] for r in rows) == sorted(ids), rows
        for row in rows:
            key = ids[row["id"]]
            instruction = INSTRUCTIONS[key]
            preview = row["instruction_preview"]
            assert preview == expected(instruction), (key, preview)
            assert len(preview) <= PREVIEW_MAX, (key, len(preview))
            assert preview != instruction, key
