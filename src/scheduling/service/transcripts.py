"""Public transcript read (the service half of the session transcript route).

The scheduler's seed event is durable model context, not a chat message: the transcript
omits every ``context_only`` event while keeping everything else, in particular the
completed assistant answer. The schedule point read remains the surface that shows the
complete instruction (spec "Sessions, context, and results").
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from scheduling.domain.errors import AuthorizationError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.ports.records import SessionEvent
from scheduling.ports.unit_of_work import UnitOfWorkFactory

SESSION_READ_SCOPE = "session.read"
TRANSCRIPT_FORBIDDEN = reason(
    "schedule.session.read_forbidden", "Reading a transcript requires the exact session.read scope"
)


@dataclass(frozen=True)
class Transcript:
    """A session's public events in ``seq`` order."""

    session_id: UUID
    events: tuple[SessionEvent, ...]


class TranscriptService:
    """Principal-scoped: another principal's session reads as not found."""

    def __init__(self, uow: UnitOfWorkFactory) -> None:
        self._uow = uow

    async def read(self, principal: Principal, session_id: UUID) -> Transcript:
        """Raises ``AuthorizationError(TRANSCRIPT_FORBIDDEN)`` without ``session.read`` and
        ``NotFoundError`` for an absent or foreign session."""
        if not principal.has(SESSION_READ_SCOPE):
            raise AuthorizationError(TRANSCRIPT_FORBIDDEN, "session.read is required")
        async with self._uow.begin(principal) as uow:
            await uow.sessions.get(session_id, principal)
            events = await uow.sessions.events(session_id, principal, include_context_only=False)
        return Transcript(session_id, tuple(e for e in events if not e.context_only))
