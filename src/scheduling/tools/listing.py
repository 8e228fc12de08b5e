"""schedule.list: bounded, summary-only discovery (spec "Model-callable lifecycle").

Each item is the allow-list below and nothing else: no instruction (not even a
preview), policy profile, requested scopes, limits, principal identity or cursor
internals. The cursor handed to the model wraps the service's keyset cursor under this
tool's own kind, so it is opaque and cannot be replayed against another listing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.domain.paging import decode_cursor, encode_cursor
from scheduling.runtime.tool_pipeline import PreparedCall, ToolExecutionContext
from scheduling.service.values import ScheduleSummary
from scheduling.tools.common import ScheduleToolDeps, instant
from scheduling.tools.schemas import LIST_MAX

SUMMARY_FIELDS = (
    "schedule_id",
    "title",
    "state",
    "pause_reason",
    "current_revision",
    "next_fire_at",
    "cadence",
)
_CURSOR_KIND = "tool.schedule.list"


def summary(item: ScheduleSummary) -> dict[str, Any]:
    """The allow-listed summary of one schedule."""
    return {
        "schedule_id": str(item.schedule_id),
        "title": item.title,
        "state": item.state,
        "pause_reason": item.pause_reason,
        "current_revision": item.current_revision,
        "next_fire_at": instant(item.next_fire_at),
        "cadence": dict(item.cadence),
    }


class ListSchedules:
    def __init__(self, deps: ScheduleToolDeps) -> None:
        self._deps = deps

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        limit = int(arguments.get("limit", LIST_MAX))
        raw = arguments.get("cursor")
        inner = None if raw is None else decode_cursor(_CURSOR_KIND, str(raw), 1)[0]
        service = self._deps.service

        async def execute() -> dict[str, Any]:
            page = await service.list(context.principal, limit=limit, cursor=inner)
            nxt = page.next_cursor
            return {
                "items": [summary(item) for item in page.items],
                "next_cursor": None if nxt is None else encode_cursor(_CURSOR_KIND, [nxt]),
            }

        return PreparedCall(view={"limit": limit}, execute=execute)
