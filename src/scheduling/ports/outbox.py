"""The outcome outbox: durable notification rows written in the deciding transaction.

``schedule_run_finished`` is appended in the same transaction as the post-run
accounting of an occurrence's run, or as the materializer's skipped/missed decision.
It carries only the pinned revision's title and the nominal firing time (ADR-0091 in
the spec), never the instruction or any run result. Delivery (push, email, webhooks)
is out of scope: ``OutcomeDelivery`` names the port; nothing implements it here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

RUN_FINISHED = "schedule_run_finished"


@dataclass(frozen=True)
class OutboxMessage:
    """One outbox row. ``id`` derives from the occurrence, so re-appending is a no-op."""

    id: UUID
    tenant_id: str
    principal_id: str
    schedule_id: UUID
    occurrence_id: UUID
    kind: str
    payload: dict[str, Any]
    created_at: datetime
    delivered_at: datetime | None = None


class OutboxRepository(Protocol):
    """Contract: ``append`` inserts unless a row with the id exists (then writes nothing
    and returns False); ``pending`` lists undelivered rows oldest first; ``mark_delivered``
    sets ``delivered_at`` only where it is still unset and returns how many it set."""

    async def append(self, message: OutboxMessage) -> bool: ...

    async def pending(self, limit: int) -> list[OutboxMessage]: ...

    async def mark_delivered(self, message_id: UUID, at: datetime) -> bool: ...


class OutcomeDelivery(Protocol):
    """Hands one outbox message to a notification channel (none is composed here)."""

    async def deliver(self, message: OutboxMessage) -> None: ...
