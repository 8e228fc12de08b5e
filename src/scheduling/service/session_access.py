"""Session transcript read and erasure for the public edges, with uniform not-found.

Wraps ``TranscriptService`` (``session.read``; omits the scheduler's context-only seed)
and ``SessionErasureService`` (the owner's audited erasure, ADR 0704). A foreign and a
missing session raise the same ``NotFoundError(SESSION_NOT_FOUND)`` with no details.
"""

from __future__ import annotations

from uuid import UUID

from scheduling.domain.errors import NotFoundError
from scheduling.domain.identity import Principal
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.records import ErasureResult
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.sessions import SessionErasureService
from scheduling.service.transcripts import Transcript, TranscriptService

SESSION_NOT_FOUND = reason(
    "schedule.session.not_found", "The session does not exist or is not visible to the caller"
)


def session_not_found() -> NotFoundError:
    return NotFoundError(SESSION_NOT_FOUND, "session not found")


class SessionAccess:
    def __init__(self, uow: UnitOfWorkFactory, clock: Clock) -> None:
        self._transcripts = TranscriptService(uow)
        self._erasure = SessionErasureService(uow, clock)

    async def transcript(self, principal: Principal, session_id: UUID) -> Transcript:
        try:
            return await self._transcripts.read(principal, session_id)
        except NotFoundError:
            raise session_not_found() from None

    async def erase(self, principal: Principal, session_id: UUID) -> ErasureResult:
        try:
            return await self._erasure.erase(principal, session_id)
        except NotFoundError:
            raise session_not_found() from None
