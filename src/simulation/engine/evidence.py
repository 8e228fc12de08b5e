"""Handing an exploration's evidence to a gate check (the ``gate_evidence`` fixture)."""

from __future__ import annotations

from typing import Any, Protocol

from simulation.engine.simulator import Exploration


class EvidenceSink(Protocol):
    def record(self, key: str, value: Any) -> None: ...

    def not_covered(self, reason: str) -> None: ...


def attach_evidence(sink: EvidenceSink, exploration: Exploration, *, prefix: str = "") -> None:
    """Record seeds, interleavings explored, steps reached and faults fired; call
    ``not_covered`` (gate ERROR) if a declared step was never reached or a planned fault
    never fired."""
    for key, value in exploration.evidence().items():
        sink.record(f"{prefix}{key}", value)
    missing = exploration.not_covered()
    if missing:
        sink.not_covered(f"{exploration.scenario.name}: " + "; ".join(missing))


def failure_report(exploration: Exploration, *, limit: int = 5) -> str:
    """A readable account of the first ``limit`` failures and the commands replaying them."""
    lines = []
    for failure in exploration.failures[:limit]:
        where = failure.saved_to
        lines.append(
            f"{failure.key.scenario} seed {failure.key.seed} execution {failure.index}: "
            + "; ".join(v.message for v in failure.violations)
        )
        lines.append("  order: " + " ".join(failure.step_order()))
        if where is not None:
            lines.append(f"  replay: scheduling-sim replay {where}")
    if len(exploration.failures) > limit:
        lines.append(f"... and {len(exploration.failures) - limit} more failing executions")
    return "\n".join(lines)
