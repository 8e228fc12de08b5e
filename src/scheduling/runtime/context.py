"""Reading a run's execution inputs: the seed instruction and the pinned agent spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduling.ports.records import SessionEvent

_TEXT_KEYS = ("text", "instruction", "content")


def _text(payload: dict[str, Any]) -> str | None:
    for key in _TEXT_KEYS:
        value = payload.get(key)
        if isinstance(value, str):
            return value
    return None


def instruction_of(events: Sequence[SessionEvent]) -> str:
    """The run's instruction: the first user-role message of the session, which for a
    scheduled run is the scheduler's context-only seed."""
    for event in events:
        if "message" not in event.event_type or event.actor == "assistant":
            continue
        text = _text(event.payload)
        if text is not None:
            return text
    return ""
