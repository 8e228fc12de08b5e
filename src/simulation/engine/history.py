"""Operation histories (Jepsen style): invoke, then ok, fail or indeterminate ("info").

``ok`` means the operation took effect and returned ``value``; ``fail`` means it
certainly took no effect; ``info`` means it may or may not have (a lost COMMIT ack).
Every event carries the virtual time and the *epoch*: the number of interleaver
decisions made so far. Tasks only run concurrently within one epoch, so an operation
really precedes another only when it completed in an earlier epoch (or earlier in the
same process); sorting by (epoch, process, seq) keeps the record deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from scheduling.ports import Clock
from simulation.engine.jsonable import to_jsonable

EventType = Literal["invoke", "ok", "fail", "info"]


@dataclass(frozen=True)
class Position:
    """Where an event sits in the partial order of an execution."""

    epoch: int
    process: str
    seq: int

    def before(self, other: Position) -> bool:
        """Whether this event certainly happened before ``other``."""
        if self.process == other.process:
            return self.seq < other.seq
        return self.epoch < other.epoch


@dataclass(frozen=True)
class HistoryEvent:
    op_id: str
    type: EventType
    op: str
    args: Mapping[str, Any]
    value: Any
    at: datetime
    position: Position

    def as_json(self) -> dict[str, Any]:
        return {
            "op_id": self.op_id,
            "type": self.type,
            "op": self.op,
            "args": to_jsonable(self.args),
            "value": to_jsonable(self.value),
            "at": to_jsonable(self.at),
            "epoch": self.position.epoch,
            "process": self.position.process,
            "seq": self.position.seq,
        }


@dataclass(frozen=True)
class StepRecord:
    """One interleaver decision, kept beside the history to explain failures."""

    epoch: int
    task: str
    step: str
    visit: int
    fault: str | None

    def describe(self) -> str:
        suffix = f" [{self.fault}]" if self.fault else ""
        return f"#{self.epoch} {self.task} leaves {self.step}#{self.visit}{suffix}"


@dataclass(frozen=True)
class Operation:
    """An invocation paired with its completion (``None`` if it never completed)."""

    op_id: str
    process: str
    op: str
    args: Mapping[str, Any]
    invoke: HistoryEvent
    completion: HistoryEvent | None

    @property
    def status(self) -> EventType:
        return "info" if self.completion is None else self.completion.type

    @property
    def value(self) -> Any:
        return None if self.completion is None else self.completion.value

    def describe(self) -> str:
        args = ", ".join(f"{k}={to_jsonable(v)!r}" for k, v in sorted(self.args.items()))
        end = (
            "never completed"
            if self.completion is None
            else f"{self.status} {to_jsonable(self.value)!r} at epoch "
            f"{self.completion.position.epoch}"
        )
        return (
            f"{self.op_id} {self.op}({args}) invoked at epoch {self.invoke.position.epoch}, {end}"
        )


class OpRef:
    """The handle a worker completes exactly once: ``ok``, ``fail`` or ``info``."""

    def __init__(self, history: History, process: str, op_id: str, op: str, args: Any) -> None:
        self._history = history
        self._process = process
        self.op_id = op_id
        self._op = op
        self._args = args
        self.done = False

    def ok(self, value: Any = None) -> None:
        self._complete("ok", value)

    def fail(self, value: Any = None) -> None:
        self._complete("fail", value)

    def info(self, value: Any = None) -> None:
        """Indeterminate: the operation may or may not have taken effect."""
        self._complete("info", value)

    def _complete(self, kind: EventType, value: Any) -> None:
        if self.done:
            raise RuntimeError(f"{self.op_id} already completed")
        self.done = True
        self._history.record(self._process, self.op_id, kind, self._op, self._args, value)


@dataclass
class History:
    """All events of one execution, plus the interleaver's decisions."""

    clock: Clock
    epoch: Callable[[], int] = lambda: 0
    events: list[HistoryEvent] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._seq: dict[str, int] = {}
        self._ops: dict[str, int] = {}

    def for_process(self, process: str) -> ProcessHistory:
        return ProcessHistory(self, process)

    def invoke(self, process: str, op: str, **args: Any) -> OpRef:
        number = self._ops.get(process, 0) + 1
        self._ops[process] = number
        op_id = f"{process}#{number}"
        self.record(process, op_id, "invoke", op, args, None)
        return OpRef(self, process, op_id, op, args)

    def record(
        self, process: str, op_id: str, kind: EventType, op: str, args: Any, value: Any
    ) -> None:
        seq = self._seq.get(process, 0) + 1
        self._seq[process] = seq
        position = Position(self.epoch(), process, seq)
        self.events.append(
            HistoryEvent(op_id, kind, op, dict(args), value, self.clock.now(), position)
        )

    def ordered(self) -> list[HistoryEvent]:
        """Events in their deterministic order: (epoch, process, seq)."""
        return sorted(
            self.events, key=lambda e: (e.position.epoch, e.position.process, e.position.seq)
        )

    def operations(self) -> list[Operation]:
        """Invocations paired with completions, in deterministic invoke order."""
        completions = {e.op_id: e for e in self.events if e.type != "invoke"}
        return [
            Operation(e.op_id, e.position.process, e.op, e.args, e, completions.get(e.op_id))
            for e in self.ordered()
            if e.type == "invoke"
        ]

    def steps_between(self, first_epoch: int, last_epoch: int) -> list[StepRecord]:
        return [s for s in self.steps if first_epoch <= s.epoch <= last_epoch]

    def as_json(self) -> list[dict[str, Any]]:
        return [e.as_json() for e in self.ordered()]


@dataclass(frozen=True)
class ProcessHistory:
    """A history bound to one process (a simulated task)."""

    history: History
    process: str

    def invoke(self, op: str, **args: Any) -> OpRef:
        return self.history.invoke(self.process, op, **args)
