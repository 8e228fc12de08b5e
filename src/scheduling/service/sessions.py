"""Session erasure (the service half of the session delete route).

One transaction: the repository first marks every linked MATERIALIZED occurrence erased
(``links_erased_at`` set, both links cleared), then deletes the checkpoints, events,
runs and the session. Schedule history (occurrence, schedule, revisions, process events)
stays; erased content does not (spec "Persistence", gate erasure_audited).
"""

from __future__ import annotations

from uuid import UUID

from scheduling.domain.identity import Principal
from scheduling.ports.clock import Clock
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import ErasureResult
from scheduling.ports.unit_of_work import UnitOfWorkFactory


class SessionErasureService:
    """Erase one of the caller's sessions (a foreign or absent one is not found).

    Erasure needs no scope beyond owning the session: it is the owner's deletion right,
    and it removes rather than reveals content (ADR 0704)."""

    def __init__(self, uow: UnitOfWorkFactory, clock: Clock, probe: Probe | None = None) -> None:
        self._uow = uow
        self._clock = clock
        self._probe = probe or NullProbe()

    async def erase(self, principal: Principal, session_id: UUID) -> ErasureResult:
        async with self._uow.begin(principal) as uow:
            result = await uow.sessions.erase(session_id, principal, self._clock.now())
            await uow.commit()
        await self._probe.step("session.erased")
        return result
