"""The point read rebuilds a stored revision once (ADR 2620): ``GET /v1/schedules/{id}``
of the same revision again takes it from the adapters' revision memo, and an update's
new revision is built (and answered) afresh."""

from __future__ import annotations

from typing import Any

import pytest

from scheduling.domain.revision import ScheduleRevision
from simulation.worlds.http import OWNER, http_world, update_body


async def test_a_revision_read_again_is_not_rebuilt(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[Any, int]] = []
    real = ScheduleRevision.from_definition.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ScheduleRevision], *args: Any, **kwargs: Any) -> ScheduleRevision:
        built.append((args[0], args[1]))
        revision: ScheduleRevision = real(cls, *args, **kwargs)
        return revision

    monkeypatch.setattr(ScheduleRevision, "from_definition", classmethod(counted))
    async with http_world(pg_url, [OWNER]) as world:
        sid = (await world.create("memo")).json()["id"]
        path = f"/v1/schedules/{sid}"
        first = await world.call("GET", path, OWNER)
        assert first.status_code == 200
        builds = sum(1 for schedule_id, _ in built if str(schedule_id) == sid)
        for _ in range(3):
            again = await world.call("GET", path, OWNER)
            assert again.json() == first.json()
        assert sum(1 for schedule_id, _ in built if str(schedule_id) == sid) == builds
        changed = update_body(first.json(), title="Evening briefing")
        updated = await world.call("PATCH", path, OWNER, json=changed)
        assert updated.status_code == 200, updated.text
        after = (await world.call("GET", path, OWNER)).json()
        assert after["revision"]["title"] == "Evening briefing"
        assert after["current_revision"] == 2
