"""A PostgreSQL-backed scheduling control plane for durable agent runs."""

from scheduling.domain.cadence import (
    Cadence,
    CadenceKind,
    DailyCadence,
    MonthDay,
    MonthlyCadence,
    OnceCadence,
    WeeklyCadence,
    YearlyCadence,
    parse_cadence,
    to_payload,
)

__version__ = "0.1.0"

__all__ = [
    "Cadence",
    "CadenceKind",
    "DailyCadence",
    "MonthDay",
    "MonthlyCadence",
    "OnceCadence",
    "WeeklyCadence",
    "YearlyCadence",
    "__version__",
    "parse_cadence",
    "to_payload",
]
