"""Checkers over execution results: ledger invariants and linearizability."""

from simulation.engine.checkers.ledger import check_ledger
from simulation.engine.checkers.linearizable import (
    LinearizabilityResult,
    SequentialModel,
    check_linearizable,
    check_linearizable_per_key,
)
from simulation.engine.checkers.violation import Violation

__all__ = [
    "LinearizabilityResult",
    "SequentialModel",
    "Violation",
    "check_ledger",
    "check_linearizable",
    "check_linearizable_per_key",
]
