"""The identifier port, so a simulator can seed every id that reaches a trace."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID


class IdGenerator(Protocol):
    """Produces new unique identifiers. Contract: never returns the same UUID twice."""

    def new_uuid(self) -> UUID: ...
