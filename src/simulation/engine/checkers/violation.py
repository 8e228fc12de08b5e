"""A checker's finding: which invariant broke, a one-line message, and the evidence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simulation.engine.jsonable import to_jsonable


@dataclass(frozen=True)
class Violation:
    invariant: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "message": self.message,
            "details": to_jsonable(self.details),
        }
