"""Provider-neutral ports (typing.Protocol only). Imports nothing but the domain."""

from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe

__all__ = ["Clock", "IdGenerator", "NullProbe", "Probe"]
