"""Checkers over execution results: ledger invariants and linearizability."""

from simulation.checkers.ledger import check_ledger
from simulation.checkers.linearizable import (
    LinearizabilityResult,
    SequentialModel,
    check_linearizable,
    check_linearizable_per_key,
)
from simulation.checkers.violation import Violation

__all__ = [
    "LinearizabilityResult",
    "SequentialModel",
    "Violation",
    "check_ledger",
    "check_linearizable",
    "check_linearizable_per_key",
]
