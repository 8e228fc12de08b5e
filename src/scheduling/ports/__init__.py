"""Provider-neutral ports (typing.Protocol only). Imports nothing but the domain."""

from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.repositories import (
    AgentRepository,
    PrincipalRepository,
    ProcessEventRepository,
    RunRepository,
    ScheduleCommand,
    ScheduleIdempotencyLedger,
    ScheduleOccurrenceRepository,
    ScheduleRepository,
    SessionRepository,
)
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory

__all__ = [
    "AgentRepository",
    "Clock",
    "IdGenerator",
    "NullProbe",
    "PrincipalRepository",
    "Probe",
    "ProcessEventRepository",
    "RunRepository",
    "ScheduleCommand",
    "ScheduleIdempotencyLedger",
    "ScheduleOccurrenceRepository",
    "ScheduleRepository",
    "SessionRepository",
    "UnitOfWork",
    "UnitOfWorkFactory",
]
