"""The drain bench times drains without its counters: a drain run with ``COUNTED: False``
installs none of the listeners (query logger, ``before_execute``, ``begin``) whose cost
would be billed to the role's client CPU, and one run with ``COUNTED: True`` installs
all three; the key never reaches the settings."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from testsupport.bench import load_bench

NOMINAL = datetime(2026, 1, 1, tzinfo=UTC)


def _world(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench(monkeypatch, "materialize_world.py", "bench_world_counters")


class _Worker:
    metrics = SimpleNamespace(dispositions={}, lags=[])

    async def run_once(self) -> Any:
        return SimpleNamespace(scanned=[], count=lambda status: 0)


class _UnitOfWork:
    engine = SimpleNamespace(sync_engine=object())

    async def dispose(self) -> None:
        return None


def _listened(world: ModuleType, monkeypatch: pytest.MonkeyPatch, extra: dict[str, Any]) -> Any:
    events: list[str] = []
    settings: dict[str, Any] = {}

    def build(*_: Any, **__: Any) -> Any:
        return SimpleNamespace(uow=_UnitOfWork(), worker=_Worker())

    def settings_for(url: str, **given: Any) -> Any:
        settings.update(given)
        return SimpleNamespace()

    monkeypatch.setattr(world, "build_scheduler", build)
    monkeypatch.setattr(world, "settings_for", settings_for)
    monkeypatch.setattr(world.SchedulerSettings, "of", staticmethod(lambda s: s))
    monkeypatch.setattr(world.event, "listen", lambda _target, name, _fn: events.append(name))
    asyncio.run(world.drain("url", NOMINAL, 0.0, extra))
    return events, settings


def test_a_timed_drain_installs_no_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _world(monkeypatch)
    events, settings = _listened(world, monkeypatch, {world.COUNTED: False, "other": 1})
    # ``connect`` (the server-CPU backend pids, ADR 2670) fires once per new connection,
    # never per decision, so it is not a counter.
    assert events == ["connect"]
    assert settings == {"other": 1}


def test_a_counted_drain_installs_every_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    # Test of the test: the listeners the timed drain must skip are really installed here.
    world = _world(monkeypatch)
    for extra in ({world.COUNTED: True}, {}):
        events, settings = _listened(world, monkeypatch, extra)
        assert sorted(events) == ["before_execute", "begin", "checkout", "connect"]
        assert settings == {}
