"""The served HTTP process freezes its startup heap before serving (ADR 2300)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from scheduling.bootstrap import serving


def test_serve_http_freezes_the_startup_heap_before_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []

    async def serve_until(*_: Any) -> None:
        seen.append(gc.get_freeze_count())

    monkeypatch.setattr(serving, "serve_until", serve_until)
    monkeypatch.setattr(serving, "build_http_app", lambda plane: object())
    gc.unfreeze()
    try:
        asyncio.run(serving.serve_http(object(), "127.0.0.1", 0, asyncio.Event()))  # type: ignore[arg-type]
    finally:
        gc.unfreeze()
    # A serve path without settle_heap() would serve with nothing frozen.
    assert len(seen) == 1
    assert seen[0] > 0
