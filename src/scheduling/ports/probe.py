"""The probe port: named steps inside transactions, for the deterministic simulator.

The product calls ``await probe.step("materialize.decision_written")`` right after
each named write. In production the probe returns at once; the simulator's probe parks
the calling task there so a seeded scheduler decides who moves next, or injects a fault.
"""

from __future__ import annotations

from typing import Protocol


class Probe(Protocol):
    """Contract: ``step`` may raise to inject a fault; it never changes product state."""

    async def step(self, name: str) -> None: ...


class NullProbe:
    """The production probe: every step returns immediately."""

    async def step(self, name: str) -> None:
        return None
