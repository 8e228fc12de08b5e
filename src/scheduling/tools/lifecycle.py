"""schedule.pause, schedule.resume, schedule.cancel: revision-guarded transitions.

Each names its schedule by stable UUID and expected revision only (a title is never a
mutation key) and calls the matching ``ScheduleService`` method with the invocation's
principal. Repeating a reached state is the service's no-op (no second event);
cancel is terminal and never touches an already materialized run.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from scheduling.runtime.tool_pipeline import PreparedCall, ToolExecutionContext
from scheduling.service.values import ScheduleResult
from scheduling.tools.common import ScheduleToolDeps, mutation_output, schedule_id


class Transition(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"


class TransitionSchedule:
    def __init__(self, deps: ScheduleToolDeps, action: Transition) -> None:
        self._deps = deps
        self._action = action

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        sid = schedule_id(arguments)
        expected = int(arguments["expected_revision"])
        service = self._deps.service
        methods = {
            Transition.PAUSE: service.pause,
            Transition.RESUME: service.resume,
            Transition.CANCEL: service.cancel,
        }
        method = methods[self._action]

        async def execute() -> dict[str, Any]:
            result: ScheduleResult = await method(context.principal, sid, expected)
            return mutation_output(result.schedule)

        view = {
            "action": self._action.value,
            "schedule_id": str(sid),
            "expected_revision": expected,
        }
        return PreparedCall(view=view, execute=execute)
