"""Virtual clock rules and seeded identifiers (pure: no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from simulation.engine.clock import VirtualClock
from simulation.engine.errors import SimulationError
from simulation.engine.ids import SeededIds

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_clock_starts_at_the_given_instant_in_utc() -> None:
    clock = VirtualClock(datetime(2026, 3, 1, 13, 0, tzinfo=timezone(timedelta(hours=1))))
    assert clock.now() == START
    assert clock.now().tzinfo is UTC


def test_clock_refuses_a_naive_start() -> None:
    with pytest.raises(SimulationError):
        VirtualClock(datetime(2026, 3, 1, 12, 0))


def test_clock_moves_only_forward() -> None:
    clock = VirtualClock(START)
    assert clock.advance(90) == START + timedelta(seconds=90)
    with pytest.raises(SimulationError, match="never goes back"):
        clock.advance(-1)
    with pytest.raises(SimulationError, match="never goes back"):
        clock.advance_to(START)
    assert clock.now() == START + timedelta(seconds=90)
    assert clock.advance_to(START + timedelta(seconds=90)) == START + timedelta(seconds=90)


async def test_lone_sleeper_autojumps_without_waiting() -> None:
    clock = VirtualClock(START)
    await clock.sleep(3600)
    assert clock.now() == START + timedelta(hours=1)
    await clock.sleep(-5)
    assert clock.now() == START + timedelta(hours=1)


def test_seeded_ids_are_a_function_of_the_seed() -> None:
    a, b, c = SeededIds(7), SeededIds(7), SeededIds(8)
    first = [a.new_uuid() for _ in range(5)]
    assert first == [b.new_uuid() for _ in range(5)]
    assert first != [c.new_uuid() for _ in range(5)]
    assert len(set(first)) == 5
    assert all(u.version == 4 for u in first)


def test_forked_streams_do_not_depend_on_interleaving() -> None:
    root = SeededIds(1)
    x1, y1 = root.fork("x"), root.fork("y")
    seq1 = [x1.new_uuid(), y1.new_uuid(), x1.new_uuid()]
    root2 = SeededIds(1)
    x2, y2 = root2.fork("x"), root2.fork("y")
    y_first = y2.new_uuid()
    assert [x2.new_uuid(), y_first, x2.new_uuid()] == seq1
