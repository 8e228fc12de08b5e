"""Readiness port: what a role needs before it serves (empty list: ready)."""

from __future__ import annotations

from typing import Protocol


class Readiness(Protocol):
    async def problems(self) -> list[str]: ...


class AlwaysReady:
    """Readiness of a role with no external dependency (memory storage)."""

    async def problems(self) -> list[str]:
        return []
