"""PostgreSQL repositories; all of one unit of work share its ``Transaction``."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.adapters.postgres.repositories.idempotency import PostgresIdempotencyLedger
from scheduling.adapters.postgres.repositories.occurrences import PostgresOccurrenceRepository
from scheduling.adapters.postgres.repositories.outbox import PostgresOutboxRepository
from scheduling.adapters.postgres.repositories.schedules import PostgresScheduleRepository
from scheduling.adapters.postgres.repositories.substrate import (
    PostgresAgentRepository,
    PostgresPrincipalRepository,
    PostgresProcessEventRepository,
    PostgresRunRepository,
    PostgresSessionRepository,
)
from scheduling.adapters.postgres.transaction import Transaction


@dataclass(frozen=True)
class Repositories:
    schedules: PostgresScheduleRepository
    occurrences: PostgresOccurrenceRepository
    idempotency: PostgresIdempotencyLedger
    principals: PostgresPrincipalRepository
    agents: PostgresAgentRepository
    sessions: PostgresSessionRepository
    runs: PostgresRunRepository
    events: PostgresProcessEventRepository
    outbox: PostgresOutboxRepository


def bind_repositories(tx: Transaction) -> Repositories:
    """Every repository, joined to ``tx``."""
    return Repositories(
        schedules=PostgresScheduleRepository(tx),
        occurrences=PostgresOccurrenceRepository(tx),
        idempotency=PostgresIdempotencyLedger(tx),
        principals=PostgresPrincipalRepository(tx),
        agents=PostgresAgentRepository(tx),
        sessions=PostgresSessionRepository(tx),
        runs=PostgresRunRepository(tx),
        events=PostgresProcessEventRepository(tx),
        outbox=PostgresOutboxRepository(tx),
    )


__all__ = [
    "PostgresAgentRepository",
    "PostgresIdempotencyLedger",
    "PostgresOccurrenceRepository",
    "PostgresPrincipalRepository",
    "PostgresProcessEventRepository",
    "PostgresRunRepository",
    "PostgresScheduleRepository",
    "PostgresSessionRepository",
    "Repositories",
    "bind_repositories",
]
