"""Test of the test for gate.schedule.offline_results: a paginator whose next page
repeats the last item of the previous one (an inclusive cursor) is refused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gates.checks.test_offline_results import read_pages


@dataclass(frozen=True)
class Item:
    id: int


@dataclass(frozen=True)
class Page:
    items: list[Item]
    next_cursor: str | None


ITEMS = [Item(n) for n in range(5)]


async def exclusive(cursor: str | None) -> Page:
    start = 0 if cursor is None else int(cursor) + 1
    nxt = str(start) if start + 1 < len(ITEMS) else None
    return Page(ITEMS[start : start + 1], nxt)


async def inclusive(cursor: str | None) -> Page:
    """The bug: the cursor names the last item shown, and the next page starts AT it."""
    start = 0 if cursor is None else int(cursor)
    page = ITEMS[start : start + 2]
    nxt = str(start + 1) if start + 2 < len(ITEMS) else None
    return Page(page, nxt)


async def test_disjoint_pages_are_read_whole() -> None:
    assert await read_pages(exclusive) == ITEMS


async def test_a_page_repeating_an_item_is_refused() -> None:
    with pytest.raises(AssertionError, match="two pages"):
        await read_pages(inclusive)


async def test_a_cursor_handed_out_twice_is_refused() -> None:
    async def looping(cursor: str | None) -> Page:
        return Page([Item(99)] if cursor is None else [], "same")

    with pytest.raises(AssertionError, match="twice"):
        await read_pages(looping)
