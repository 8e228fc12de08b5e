"""Where faults fire: explicit specs at named steps, or a seeded rate over eligible steps."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from simulation.engine.errors import FaultKind

# What one client's connection can suffer; any server, the shared one included.
SERVER_FAULT_KINDS: tuple[FaultKind, ...] = (FaultKind.CRASH_SERVER,)
# A window in which the (simulated) server refuses new connections: any server, but
# not a client's fault, so not among the default kinds (their seeded draws stay put).
REFUSAL_FAULT_KINDS: tuple[FaultKind, ...] = (FaultKind.REFUSE_CONNECTIONS,)
CLIENT_FAULT_KINDS: tuple[FaultKind, ...] = tuple(
    k for k in FaultKind if k not in SERVER_FAULT_KINDS and k not in REFUSAL_FAULT_KINDS
)


@dataclass(frozen=True, order=True)
class Transition:
    """A parked task's next move: the code after its ``visit``-th arrival at ``step``."""

    task: str
    step: str
    visit: int

    def as_json(self) -> list[object]:
        return [self.task, self.step, self.visit]


@dataclass(frozen=True)
class FaultSpec:
    """Inject ``kind`` when a task leaves ``step`` (its ``visit``-th arrival there).

    ``task=None`` matches any task; ``visit=None`` matches every arrival.
    """

    step: str
    kind: FaultKind
    task: str | None = None
    visit: int | None = 1

    def matches(self, transition: Transition) -> bool:
        return (
            transition.step == self.step
            and (self.task is None or self.task == transition.task)
            and (self.visit is None or self.visit == transition.visit)
        )

    def as_json(self) -> dict[str, object]:
        return {"step": self.step, "kind": self.kind.value, "task": self.task, "visit": self.visit}


@dataclass
class FaultPolicy:
    """Decides the fault (if any) for a released transition.

    Explicit specs win; otherwise, with a ``rate`` and a seeded ``rng``, each release at
    an eligible step draws a fault kind. Each spec fires at most once per execution.
    """

    specs: tuple[FaultSpec, ...] = ()
    rate: float = 0.0
    kinds: tuple[FaultKind, ...] = CLIENT_FAULT_KINDS
    eligible_steps: frozenset[str] = frozenset()
    rng: random.Random | None = None

    def __post_init__(self) -> None:
        self._spent: set[int] = set()

    def decide(self, transition: Transition) -> FaultKind | None:
        for index, spec in enumerate(self.specs):
            if index not in self._spent and spec.matches(transition):
                self._spent.add(index)
                return spec.kind
        if self.rate > 0 and self.rng is not None and transition.step in self.eligible_steps:
            # Draw both numbers every time so the stream does not depend on the outcome.
            roll = self.rng.random()
            kind = self.kinds[self.rng.randrange(len(self.kinds))]
            if roll < self.rate:
                return kind
        return None

    def unfired(self) -> list[FaultSpec]:
        """Explicit specs whose step was never reached: reported as not covered."""
        return [spec for i, spec in enumerate(self.specs) if i not in self._spent]


def specs_from_json(items: Iterable[dict[str, object]]) -> tuple[FaultSpec, ...]:
    out = []
    for item in items:
        visit = item.get("visit")
        task = item.get("task")
        out.append(
            FaultSpec(
                step=str(item["step"]),
                kind=FaultKind(str(item["kind"])),
                task=None if task is None else str(task),
                visit=None if visit is None else int(str(visit)),
            )
        )
    return tuple(out)
