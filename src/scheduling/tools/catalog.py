"""The six schedule tools' specs, their registration and the default-agent roster.

Registration and the roster share one condition: both schedule deployment flags
(``AGENT_SCHEDULE_API_ENABLED`` and ``AGENT_SCHEDULE_WORKER_ENABLED``) are on. With
either off, no schedule tool is registered, advertised or in the default agent.
"""

from __future__ import annotations

from typing import Any

from scheduling.runtime.tool_pipeline import (
    Idempotency,
    OutputTrust,
    RegisteredTool,
    Risk,
    SideEffect,
    TargetKind,
    ToolHandler,
    ToolKind,
    ToolRegistry,
    ToolSource,
    ToolSpec,
)
from scheduling.service.schedules import CANCEL, READ, WRITE
from scheduling.tools import schemas
from scheduling.tools.common import ScheduleToolDeps
from scheduling.tools.create import CreateSchedule
from scheduling.tools.lifecycle import Transition, TransitionSchedule
from scheduling.tools.listing import ListSchedules
from scheduling.tools.normalize import normalizer
from scheduling.tools.update import UpdateSchedule

CREATE, LIST, UPDATE = "schedule.create", "schedule.list", "schedule.update"
PAUSE, RESUME, CANCEL_TOOL = "schedule.pause", "schedule.resume", "schedule.cancel"
SCHEDULE_TOOL_NAMES = frozenset({CREATE, LIST, UPDATE, PAUSE, RESUME, CANCEL_TOOL})
CREATE_VERSIONS = ("1.1.1", "1.2.0", "1.3.0")
"""Spec: 1.1.1 remains for pinned runs, 1.2.0 adds use_website, 1.3.0 place_call."""
TIMEOUT_SECONDS = 15
MUTATION_OUTPUT_BYTES = 4096
DISCOVERY_OUTPUT_BYTES = 524_288


def _spec(
    name: str,
    version: str,
    side_effect: SideEffect,
    risk: Risk,
    idempotency: Idempotency,
    scope: str,
    parallel: bool,
    schema: dict[str, Any],
    ceiling: int = MUTATION_OUTPUT_BYTES,
    description: str = "",
) -> ToolSpec:
    return ToolSpec(
        name=name,
        version=version,
        kind=ToolKind.CAPABILITY,
        source=ToolSource.BUILTIN,
        target_kind=TargetKind.IN_PROCESS,
        side_effect=side_effect,
        risk=risk,
        idempotency=idempotency,
        required_scopes=frozenset({scope}),
        timeout_seconds=TIMEOUT_SECONDS,
        maximum_output_bytes=ceiling,
        allow_parallel=parallel,
        output_trust=OutputTrust.INTERNAL_TOOL,
        input_schema=schema,
        description=description,
    )


W, D, H = SideEffect.EXTERNAL_WRITE, SideEffect.EXTERNAL_DELETE, Risk.HIGH
COND, IDEM = Idempotency.CONDITIONALLY_IDEMPOTENT, Idempotency.IDEMPOTENT


def schedule_tool_specs() -> list[ToolSpec]:
    """Every schedule tool version this build serves (create 1.1.1 and 1.2.0 stay for
    pinned runs; 1.3.0 is the newest, advertised one)."""
    return [
        _spec(
            CREATE, "1.1.1", W, H, COND, WRITE, False, schemas.create_schema(website=False),
            description="Create one schedule: a one-time 'at' instant or one recurring cadence.",
        ),
        _spec(
            CREATE, "1.2.0", W, H, COND, WRITE, False, schemas.create_schema(website=True),
            description="Create one schedule; use_website=true binds the chat's website.",
        ),
        _spec(
            CREATE, "1.3.0", W, H, COND, WRITE, False,
            schemas.create_schema(website=True, calling=True),
            description="Create one schedule; use_website=true binds the chat's website,"
            " place_call=true asks for calling.",
        ),
        _spec(
            LIST, "1.0.0", SideEffect.NONE, Risk.LOW, Idempotency.READ_ONLY, READ, True,
            schemas.LIST, ceiling=DISCOVERY_OUTPUT_BYTES,
            description="List schedule summaries (no instructions), 1-50 per page.",
        ),
        _spec(
            UPDATE, "1.0.0", W, H, COND, WRITE, False, schemas.UPDATE,
            description="Patch a schedule's title, instruction, at or cadence.",
        ),
        _spec(PAUSE, "1.0.0", W, H, IDEM, WRITE, False, schemas.MUTATION,
              description="Pause a schedule."),
        _spec(RESUME, "1.0.0", W, H, IDEM, WRITE, False, schemas.MUTATION,
              description="Resume a paused schedule at its next future firing."),
        _spec(CANCEL_TOOL, "1.0.0", D, H, IDEM, CANCEL, False, schemas.MUTATION,
              description="Cancel a schedule for good (does not cancel a started run)."),
    ]  # fmt: skip


def schedule_flags_on(*, api_enabled: bool, worker_enabled: bool) -> bool:
    return api_enabled and worker_enabled


def schedule_handlers(deps: ScheduleToolDeps) -> dict[str, ToolHandler]:
    create = CreateSchedule(deps)
    return {
        CREATE: create,
        LIST: ListSchedules(deps),
        UPDATE: UpdateSchedule(deps),
        PAUSE: TransitionSchedule(deps, Transition.PAUSE),
        RESUME: TransitionSchedule(deps, Transition.RESUME),
        CANCEL_TOOL: TransitionSchedule(deps, Transition.CANCEL),
    }


def register_schedule_tools(
    registry: ToolRegistry,
    deps: ScheduleToolDeps | None,
    *,
    api_enabled: bool,
    worker_enabled: bool,
) -> None:
    """Register the six tools only when both schedule flags are on (and a service exists)."""
    if deps is None or not schedule_flags_on(
        api_enabled=api_enabled, worker_enabled=worker_enabled
    ):
        return
    handlers = schedule_handlers(deps)
    for spec in schedule_tool_specs():
        registry.register(
            RegisteredTool(spec, handler=handlers[spec.name], normalize=normalizer(spec))
        )


def default_agent_roster(
    *, api_enabled: bool, worker_enabled: bool, base: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The default agent's tool names: ``base`` plus the schedule tools under the flags."""
    if schedule_flags_on(api_enabled=api_enabled, worker_enabled=worker_enabled):
        return base | SCHEDULE_TOOL_NAMES
    return base
