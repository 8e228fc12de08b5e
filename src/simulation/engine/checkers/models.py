"""Reference sequential models for the linearizability checker."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

TERMINAL = frozenset({"COMPLETED", "CANCELLED"})


@dataclass(frozen=True)
class RegisterModel:
    """A single register: ``write(value)`` -> None, ``read()`` -> value,
    ``cas(expected, new)`` -> bool."""

    start: Any = None

    def initial(self) -> Hashable:
        return self.start  # type: ignore[no-any-return]

    def apply(self, state: Hashable, op: str, args: Mapping[str, Any]) -> tuple[Hashable, Any]:
        if op == "write":
            return args["value"], None
        if op == "read":
            return state, state
        if op == "cas":
            if state == args["expected"]:
                return args["new"], True
            return state, False
        raise ValueError(f"unknown register operation {op!r}")


@dataclass(frozen=True)
class ScheduleLifecycleModel:
    """The spec's closed schedule transitions ("State transitions"), one schedule.

    State is ``(state, revision)``. Operations take ``expected_revision``; a stale value
    is a conflict that changes nothing. ``update`` creates revision N+1; pause, resume
    and cancel keep the revision and are idempotent against the state they reach;
    COMPLETED and CANCELLED are terminal. Results are ``(verdict, state, revision)``
    with verdict ``"ok"`` or ``"conflict"``; ``read`` returns ``("ok", state, revision)``.
    """

    state: str = "ACTIVE"
    revision: int = 1

    def initial(self) -> Hashable:
        return (self.state, self.revision)

    def apply(self, state: Hashable, op: str, args: Mapping[str, Any]) -> tuple[Hashable, Any]:
        assert isinstance(state, tuple)
        current: str = state[0]
        revision: int = state[1]
        if op == "read":
            return state, ("ok", current, revision)
        if args.get("expected_revision") != revision:
            return state, ("conflict", current, revision)
        target = {"pause": "PAUSED", "resume": "ACTIVE", "cancel": "CANCELLED"}.get(op)
        if op == "update":
            if current in TERMINAL:
                return state, ("conflict", current, revision)
            return (current, revision + 1), ("ok", current, revision + 1)
        if target is None:
            raise ValueError(f"unknown lifecycle operation {op!r}")
        allowed = {
            "PAUSED": {"ACTIVE", "PAUSED"},
            "ACTIVE": {"PAUSED", "ACTIVE"},
            "CANCELLED": {"ACTIVE", "PAUSED", "CANCELLED"},
        }[target]
        if current not in allowed:
            return state, ("conflict", current, revision)
        return (target, revision), ("ok", target, revision)
