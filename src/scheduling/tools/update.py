"""schedule.update: the closed conversational patch (title, instruction, at or one cadence).

The handler passes its invocation key to ``ScheduleService.patch``, which reuses the
schedule idempotency ledger and copies every hidden authority and execution field
from the current revision. The approval view shows the exact ID, expected revision
and the supplied patch, and lists the omitted fields as unchanged (it never reads or
invents their current content).

Before approval ``prepare`` asks the service what the patch would refuse
(``check_patch``: a schedule the caller cannot see, a stale revision, a terminal
state, the key used for another request), so those fail with the service's codes and
nothing asked or recorded (ADR 2122); a key that already committed passes, and the
execution replays it. The patch itself re-checks under the row lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduling.runtime.tool_pipeline import PreparedCall, ToolExecutionContext
from scheduling.service.values import SchedulePatch
from scheduling.tools.common import (
    ScheduleToolDeps,
    mutation_output,
    schedule_id,
    when_payload,
)

PATCH_FIELDS = ("title", "instruction", "cadence")
"""What a patch can change; ``at`` replaces the cadence with one exact instant."""


class UpdateSchedule:
    def __init__(self, deps: ScheduleToolDeps) -> None:
        self._deps = deps

    async def prepare(
        self, arguments: Mapping[str, Any], context: ToolExecutionContext
    ) -> PreparedCall:
        deps = self._deps
        sid = schedule_id(arguments)
        expected = int(arguments["expected_revision"])
        title, instruction = arguments.get("title"), arguments.get("instruction")
        at, cadence = arguments.get("at"), arguments.get("cadence")
        # The service's own closed-patch rules (empty, at with cadence) come first.
        SchedulePatch(title=title, instruction=instruction, at=at, cadence=cadence)
        deps.scan(title=title, instruction=instruction)
        supplied: dict[str, Any] = {}
        if title is not None:
            supplied["title"] = title
        if instruction is not None:
            supplied["instruction"] = instruction
        when = None
        if at is not None or cadence is not None:
            when = when_payload(at, cadence)
            if when["kind"] == "ONCE":
                supplied["at"] = when["at"]
            else:
                supplied["cadence"] = when
        patch = SchedulePatch(
            title=title,
            instruction=instruction,
            at=None if when is None or when["kind"] != "ONCE" else when["at"],
            cadence=None if when is None or when["kind"] == "ONCE" else when,
        )
        unchanged = [
            name
            for name in PATCH_FIELDS
            if name not in supplied and not (name == "cadence" and "at" in supplied)
        ]
        view = {
            "schedule_id": str(sid),
            "expected_revision": expected,
            "patch": supplied,
            "unchanged": unchanged,
        }
        await deps.service.check_patch(
            context.principal, sid, expected, patch, context.idempotency_key
        )

        async def execute() -> dict[str, Any]:
            result = await deps.service.patch(
                context.principal, sid, expected, patch, context.idempotency_key
            )
            return {**mutation_output(result.schedule), "replayed": result.replayed}

        return PreparedCall(view=view, execute=execute)
