"""The six model-callable schedule tools (spec "Model-callable creation" and "lifecycle").

Each handler calls ``ScheduleService`` directly with the invocation's principal and
idempotency key: no internal HTTP, no credential. See ``catalog`` for the specs,
their registration under the schedule flag pair and the default-agent roster.
"""

from scheduling.tools.catalog import (
    CANCEL_TOOL,
    CREATE,
    DISCOVERY_OUTPUT_BYTES,
    LIST,
    MUTATION_OUTPUT_BYTES,
    PAUSE,
    RESUME,
    SCHEDULE_TOOL_NAMES,
    UPDATE,
    default_agent_roster,
    register_schedule_tools,
    schedule_tool_specs,
)
from scheduling.tools.common import ScheduleToolDeps
from scheduling.tools.create import (
    BROWSER_PROFILE_REQUIRED,
    CALLING_UNAVAILABLE,
    ExecutionBounds,
    derive_bounds,
)
from scheduling.tools.listing import SUMMARY_FIELDS

__all__ = [
    "BROWSER_PROFILE_REQUIRED",
    "CALLING_UNAVAILABLE",
    "CANCEL_TOOL",
    "CREATE",
    "DISCOVERY_OUTPUT_BYTES",
    "LIST",
    "MUTATION_OUTPUT_BYTES",
    "PAUSE",
    "RESUME",
    "SCHEDULE_TOOL_NAMES",
    "SUMMARY_FIELDS",
    "UPDATE",
    "ExecutionBounds",
    "ScheduleToolDeps",
    "default_agent_roster",
    "derive_bounds",
    "register_schedule_tools",
    "schedule_tool_specs",
]
