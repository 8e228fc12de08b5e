"""Linearizability of a history against a sequential model (Wing & Gong, with Lowe's
memoization as in Knossos).

A history is linearizable when its ``ok`` operations, together with any subset of its
indeterminate (``info``) operations, can be put in one sequential order that respects
real time (an operation that completed before another was invoked comes first) and in
which the model returns exactly what each ``ok`` operation observed. ``fail``
operations took no effect and are left out. Search is exponential in the worst case,
so check per key (one schedule each) and keep histories small.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from simulation.engine.checkers.violation import Violation
from simulation.engine.errors import SimulationError
from simulation.engine.history import History, Operation, StepRecord
from simulation.engine.jsonable import to_jsonable


class SequentialModel(Protocol):
    """A sequential specification. States must be hashable and immutable.

    ``apply`` returns the next state and the result the operation must observe;
    results are compared with ``==`` to the value the history recorded.
    """

    def initial(self) -> Hashable: ...

    def apply(self, state: Hashable, op: str, args: Mapping[str, Any]) -> tuple[Hashable, Any]: ...


@dataclass(frozen=True)
class Mismatch:
    operation: Operation
    expected: Any
    after: tuple[str, ...]


@dataclass
class LinearizabilityResult:
    valid: bool
    order: list[str] = field(default_factory=list)
    """A witness order of op ids when valid; the longest legal prefix when not."""
    explanation: str = ""
    conflicting: tuple[str, ...] = ()
    steps_between: list[StepRecord] = field(default_factory=list)

    def violation(self, key: str = "") -> Violation | None:
        if self.valid:
            return None
        return Violation(
            "linearizable",
            f"{key + ': ' if key else ''}{self.explanation}",
            {
                "longest_legal_prefix": self.order,
                "conflicting": list(self.conflicting),
                "steps_between": [s.describe() for s in self.steps_between],
            },
        )


def _precedes(a: Operation, b: Operation) -> bool:
    return (
        a.status == "ok"
        and a.completion is not None
        and a.completion.position.before(b.invoke.position)
    )


def check_linearizable(
    operations: Sequence[Operation],
    model: SequentialModel,
    *,
    history: History | None = None,
    limit: int = 200_000,
) -> LinearizabilityResult:
    """Search for a legal sequential order; explain the deepest dead end if none."""
    ops = [o for o in operations if o.status in ("ok", "info")]
    index = {o.op_id: i for i, o in enumerate(ops)}
    preds = [frozenset(index[p.op_id] for p in ops if _precedes(p, o)) for o in ops]
    must = frozenset(i for i, o in enumerate(ops) if o.status == "ok")
    seen: set[tuple[frozenset[int], Hashable]] = set()
    best: list[int] = []
    best_mismatches: list[Mismatch] = []
    budget = [limit]

    def search(done: frozenset[int], state: Hashable, order: list[int]) -> bool:
        nonlocal best, best_mismatches
        if must <= done:
            best = list(order)
            return True
        budget[0] -= 1
        if budget[0] < 0:
            raise SimulationError(
                f"linearizability search gave up after {limit} states: check smaller keys"
            )
        mismatches: list[Mismatch] = []
        for i, o in enumerate(ops):
            if i in done or not preds[i] <= done:
                continue
            next_state, result = model.apply(state, o.op, o.args)
            if o.status == "ok" and result != o.value:
                mismatches.append(Mismatch(o, result, tuple(ops[j].op_id for j in order)))
                continue
            key = (done | {i}, next_state)
            if key in seen:
                continue
            seen.add(key)
            order.append(i)
            if search(done | {i}, next_state, order):
                return True
            order.pop()
        if len(order) >= len(best) and mismatches:
            best, best_mismatches = list(order), mismatches
        return False

    if search(frozenset(), model.initial(), []):
        return LinearizabilityResult(True, [ops[i].op_id for i in best])
    return _explain(ops, best, best_mismatches, history)


def _explain(
    ops: list[Operation], best: list[int], mismatches: list[Mismatch], history: History | None
) -> LinearizabilityResult:
    prefix = [ops[i].op_id for i in best]
    if not mismatches:
        return LinearizabilityResult(False, prefix, "no legal order exists")
    # The op that had to come next: the earliest-completing mismatch.
    failing = min(
        mismatches,
        key=lambda m: (
            m.operation.completion.position.epoch if m.operation.completion else 1 << 30,
            m.operation.op_id,
        ),
    )
    op = failing.operation
    other = ops[best[-1]] if best else None
    text = (
        f"{op.describe()}; in every legal order it would return {to_jsonable(failing.expected)!r}"
    )
    conflicting: tuple[str, ...] = (op.op_id,)
    steps: list[StepRecord] = []
    if other is not None:
        text += f", given {other.describe()} before it"
        conflicting = (other.op_id, op.op_id)
        first = min(other.invoke.position.epoch, op.invoke.position.epoch)
        last_ev = op.completion or op.invoke
        last = max(last_ev.position.epoch, (other.completion or other.invoke).position.epoch)
        if history is not None:
            steps = history.steps_between(first, last)
    if steps:
        text += "; steps in between: " + ", ".join(s.describe() for s in steps)
    return LinearizabilityResult(False, prefix, text, conflicting, steps)


def check_linearizable_per_key(
    history: History,
    model_for: Callable[[Hashable], SequentialModel],
    key: Callable[[Operation], Hashable],
) -> list[Violation]:
    """Check each key's sub-history (e.g. one schedule) on its own model instance."""
    groups: dict[Hashable, list[Operation]] = {}
    for op in history.operations():
        groups.setdefault(key(op), []).append(op)
    found = []
    for k in sorted(groups, key=str):
        result = check_linearizable(groups[k], model_for(k), history=history)
        violation = result.violation(str(k))
        if violation is not None:
            found.append(violation)
    return found
