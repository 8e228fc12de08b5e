"""The soak's nothing-lost check fails on a lost, a doubly decided and a foreign instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from simulation.scenarios.soak import lost_instants

SID = UUID(int=7)
CADENCE = {"kind": "DAILY", "local_time": "09:00", "timezone": "UTC"}
DAY = timedelta(days=1)
T0 = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
END = T0 + 5 * DAY


def check(instants: list[datetime], coalesced: list[dict[str, Any]] | None = None) -> list[str]:
    schedules = {SID: {"state": "ACTIVE", "next_fire_at": T0 + 6 * DAY}}
    occ = [{"schedule_id": SID, "nominal_fire_at": t} for t in instants]
    return lost_instants(
        {SID: T0},
        occ,
        schedules,
        {(SID, 1): {"cadence": CADENCE}},
        [(SID, c) for c in coalesced or []],
        END,
    )


def test_complete_ledger_passes() -> None:
    assert check([T0 + i * DAY for i in range(6)]) == []


def test_coalesced_range_counts_as_decided() -> None:
    payload = {
        "first_nominal_at": T0.isoformat(),
        "last_nominal_at": (T0 + 3 * DAY).isoformat(),
        "count": 4,
    }
    assert check([T0 + 4 * DAY, T0 + 5 * DAY], [payload]) == []


def test_a_lost_instant_is_reported() -> None:
    problems = check([T0 + i * DAY for i in range(6) if i != 2])
    assert any("1 instants lost" in p for p in problems)


def test_an_instant_decided_twice_is_reported() -> None:
    payload = {"first_nominal_at": T0.isoformat(), "last_nominal_at": T0.isoformat(), "count": 1}
    problems = check([T0 + i * DAY for i in range(6)], [payload])
    assert any("decided twice" in p for p in problems)


def test_a_wrong_coalesced_count_and_a_foreign_instant_are_reported() -> None:
    payload = {"first_nominal_at": T0.isoformat(), "last_nominal_at": T0.isoformat(), "count": 2}
    problems = check([T0 + i * DAY for i in range(1, 6)] + [T0 + timedelta(hours=1)], [payload])
    assert any("coalesced count" in p for p in problems)
    assert any("not of its cadence" in p for p in problems)
