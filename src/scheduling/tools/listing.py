"""schedule.list: bounded, summary-only discovery (spec "Model-callable lifecycle").

Each item is the allow-list below and nothing else: no instruction (not even a
preview), policy profile, requested scopes, limits, principal identity or cursor
internals. The cursor handed to the model is the service's keyset cursor sealed with
AES-256-GCM under the deployment key ``tool.cursor`` and bound to this tool's kind and
the caller's tenant and principal (ADR 2103): it reveals nothing, and a tampered,
truncated or foreign one fails as ``schedule.page.invalid_cursor`` before any read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.domain.sealed_cursors import open_cursor, seal_cursor
from scheduling.ports.keys import TOOL_CURSOR
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
        who = context.principal
        key = await self._deps.keys.key(TOOL_CURSOR)
        binding = (_CURSOR_KIND, who.tenant_id, who.principal_id)
        inner = None if raw is None else open_cursor(key, *binding, str(raw))
        service = self._deps.service

        async def execute() -> dict[str, Any]:
            page = await service.list(who, limit=limit, cursor=inner)
            nxt = page.next_cursor
            return {
                "items": [summary(item) for item in page.items],
                "next_cursor": None if nxt is None else seal_cursor(key, *binding, nxt),
            }

        return PreparedCall(view={"limit": limit}, execute=execute)
