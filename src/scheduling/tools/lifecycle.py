"""schedule.pause, schedule.resume, schedule.cancel: revision-guarded transitions.

Each names its schedule by stable UUID and expected revision only (a title is never a
mutation key) and calls the matching ``ScheduleService`` method with the invocation's
principal. Repeating a reached state is the service's no-op (no second event);
cancel is terminal and never touches an already materialized run.

``prepare`` reads the schedule with the invocation's principal first (``visible``) and
applies the closed transition table to it, so an unknown, another principal's or
another tenant's id (``schedule.not_found``), a stale revision
(``schedule.lifecycle.stale_revision``) and a transition out of a terminal state
(``schedule.lifecycle.illegal_transition``) fail before any approval is asked or
recorded (ADR 2122). The service re-checks all of it under the row lock when the
approved call executes. A reached state (pause of a PAUSED schedule) still shows the
same view and asks: the view never depends on the state read here, so a retry after
a crash keeps the approved view's hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from scheduling.domain.lifecycle import Action, decide
from scheduling.runtime.tool_pipeline import PreparedCall, ToolExecutionContext
from scheduling.service.values import ScheduleResult
from scheduling.tools.common import ScheduleToolDeps, mutation_output, schedule_id


class Transition(StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"


ACTIONS = {
    Transition.PAUSE: Action.PAUSE,
    Transition.RESUME: Action.RESUME,
    Transition.CANCEL: Action.CANCEL,
}


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
        # Not found, stale and illegal fail here, before approval (no rows, nobody asked).
        current = await service.visible(context.principal, sid)
        decide(ACTIONS[self._action], current.state, current.current_revision, expected)

        async def execute() -> dict[str, Any]:
            result: ScheduleResult = await method(context.principal, sid, expected)
            return mutation_output(result.schedule)

        view = {
            "action": self._action.value,
            "schedule_id": str(sid),
            "expected_revision": expected,
        }
        return PreparedCall(view=view, execute=execute)
