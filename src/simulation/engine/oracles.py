"""Oracles decide who moves at each decision point: seeded random walk, exhaustive
enumeration with sleep-set pruning, strict replay, and a guide used by shrinking."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulation.engine.errors import Divergence, FaultKind
from simulation.engine.faults import Transition
from simulation.engine.interleaver import Choice, DecisionPoint


class RandomOracle:
    """Uniform choice among enabled tasks from one seeded ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def choose(self, point: DecisionPoint) -> Choice | None:
        return Choice(point.options[self._rng.randrange(len(point.options))].task)


class ReplayOracle:
    """Follows a trace's decisions exactly; any difference in the options diverges."""

    def __init__(self, events: Sequence[dict[str, Any]]) -> None:
        self._decisions = [e for e in events if "chosen" in e]

    def choose(self, point: DecisionPoint) -> Choice | None:
        if point.index >= len(self._decisions):
            raise Divergence(f"decision {point.index} was not in the recorded trace")
        recorded = self._decisions[point.index]
        options = [o.as_json() for o in point.options]
        if options != recorded["options"]:
            raise Divergence(
                f"decision {point.index}: options {options} differ from recorded "
                f"{recorded['options']}"
            )
        fault = recorded.get("fault")
        return Choice(str(recorded["chosen"]), None if fault is None else FaultKind(fault), True)


class GuideOracle:
    """Follows a guide of task names, skipping names not enabled; then runs
    non-preemptively (keep the last task going, else the first by name)."""

    def __init__(self, guide: Sequence[str]) -> None:
        self._guide = list(guide)
        self._next = 0
        self._last: str | None = None

    def choose(self, point: DecisionPoint) -> Choice | None:
        names = [o.task for o in point.options]
        while self._next < len(self._guide):
            name = self._guide[self._next]
            self._next += 1
            if name in names:
                self._last = name
                return Choice(name)
        pick = self._last if self._last in names else names[0]
        self._last = pick
        return Choice(pick)


@dataclass
class _Frame:
    options: tuple[Transition, ...]
    sleep: frozenset[Transition]
    chosen: Transition
    explored: list[Transition] = field(default_factory=list)


class ExhaustiveSearch:
    """Stateless depth-first enumeration of interleavings (re-executing from scratch),
    pruned with sleep sets (Godefroid): after exploring transition ``t`` at a state, a
    sibling branch need not try ``t`` again until a transition dependent on ``t`` runs.
    """

    def __init__(self, independent: Callable[[Transition, Transition], bool]) -> None:
        self._independent = independent
        self._stack: list[_Frame] = []
        self.started = False

    def oracle(self) -> _ExhaustiveOracle:
        self.started = True
        return _ExhaustiveOracle(self)

    def advance(self) -> bool:
        """Move to the next unexplored path; False when the tree is exhausted."""
        while self._stack:
            top = self._stack[-1]
            top.explored.append(top.chosen)
            remaining = [o for o in top.options if o not in top.sleep and o not in top.explored]
            if remaining:
                top.chosen = remaining[0]
                return True
            self._stack.pop()
        return False


class _ExhaustiveOracle:
    def __init__(self, search: ExhaustiveSearch) -> None:
        self._search = search
        self._sleep: frozenset[Transition] = frozenset()

    def choose(self, point: DecisionPoint) -> Choice | None:
        stack = self._search._stack
        if point.index < len(stack):
            frame = stack[point.index]
            if frame.options != point.options:
                raise Divergence(
                    f"decision {point.index}: options changed between executions of one "
                    "prefix (the scenario is not deterministic)"
                )
        else:
            candidates = [o for o in point.options if o not in self._sleep]
            if not candidates:
                return None  # every continuation is equivalent to an explored one
            frame = _Frame(point.options, self._sleep, candidates[0])
            stack.append(frame)
        independent = self._search._independent
        self._sleep = frozenset(
            u for u in frame.sleep | set(frame.explored) if independent(u, frame.chosen)
        )
        return Choice(frame.chosen.task)
