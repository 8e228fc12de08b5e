"""The drain bench's ``--loop`` (ADR 2440) really runs the drain on the named loop, and
refuses a name it does not know instead of falling back silently to asyncio."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest

from testsupport.bench import load_bench

NOMINAL = datetime(2026, 1, 1, tzinfo=UTC)


def _world(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "materialize_world.py", "bench_world_loop")


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_drain_runs_on_the_named_loop(loop: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    world = _world(monkeypatch)
    seen: dict[str, Any] = {}

    async def drain(url: str, nominal: datetime, start: float, extra: dict[str, Any]) -> str:
        seen["extra"] = extra
        return type(asyncio.get_running_loop()).__module__

    monkeypatch.setattr(world, "drain", drain)
    extra = {world.EVENT_LOOP: loop, "other": 1}
    module = world.drain_process(("url", NOMINAL, 0.0, extra))
    assert module.split(".")[0] == loop
    assert seen["extra"] == {"other": 1}  # the loop's key never reaches the settings
    assert extra == {world.EVENT_LOOP: loop, "other": 1}  # the caller's dict is kept


def test_unknown_loop_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _world(monkeypatch)
    with pytest.raises(ValueError, match="unknown event loop"):
        world.drain_process(("url", NOMINAL, 0.0, {world.EVENT_LOOP: "trio"}))
