"""The metrics scrape's tenant-safety check, shown failing on a planted exporter.

The roles' metrics themselves are the gate suite's ``rule.metrics.scheduler`` and
``rule.metrics.run_worker`` (``src/gates/checks/test_rules_metrics.py``): real roles
from the composition root on a virtual clock, each serving its registry on a loopback
port, their figures compared with the database's. This is the test of their
``unsafe`` check: a wrong exporter labelling a counter by schedule and instruction.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from gates.checks.metrics_support import scrape, unsafe
from scheduling.metrics import Exported, serving_metrics

SECRETISH = "Marzipan-ball-throwing-instruction-7731"


class Planted:
    """A wrong role exporter: labels a counter by schedule and instruction."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        counter = Counter("scheduling_fired", "fired", ["schedule", "what"], registry=self.registry)
        counter.labels("0b7c2f3e-1d2a-4c5b-8e9f-001122334455", SECRETISH).inc()

    async def refresh(self) -> None:
        return None


async def test_the_label_check_catches_a_planted_unsafe_exporter() -> None:
    planted: Exported = Planted()
    async with serving_metrics(planted, "127.0.0.1", 0) as port:
        body = (await scrape(port)).body
    found = unsafe(body, [SECRETISH])
    assert "label schedule" in found
    assert "label what" in found
    assert any(f.startswith("value 0b7c2f3e") for f in found)
    assert f"text {SECRETISH}" in found
