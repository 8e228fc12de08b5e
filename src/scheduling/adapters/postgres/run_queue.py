"""The PostgreSQL run queue: claims by priority class with reserved capacity.

One claim is one short transaction through a trusted unit of work:

1. ``pg_advisory_xact_lock`` on the queue key, so the live-lease counts read in step 2
   cannot change under a concurrent claimer before this claim commits (without it two
   claimers could both take the last async slot);
2. count runs holding a live lease (``RUNNING`` and ``lease_expires_at > now``) by class;
3. pick the first eligible row of the admitted classes with ``FOR UPDATE SKIP LOCKED``
   (QUEUED, or RUNNING under an expired lease, ``scheduled_for <= now``);
4. set RUNNING, owner, expiry and ``fencing_token + 1``; read the latest checkpoint.

``now`` is always a bound parameter from the caller's Clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select, text, update

from scheduling.adapters.postgres.repositories.substrate import _to_run
from scheduling.adapters.postgres.tables import runs
from scheduling.adapters.postgres.uow import PostgresUnitOfWork, PostgresUnitOfWorkFactory
from scheduling.ports.probe import NullProbe, Probe
from scheduling.ports.records import RunStatus
from scheduling.ports.runtime import ClaimedRun, Lease, QueueCapacity, RunPriority

# An arbitrary constant naming "the run queue" among advisory locks (fits int8).
QUEUE_LOCK_KEY = 0x52554E51  # "RUNQ"


def _class_filter(classes: list[RunPriority]) -> ColumnElement[bool]:
    parts: list[ColumnElement[bool]] = []
    for cls in classes:
        if cls is RunPriority.INTERACTIVE:
            parts.append(runs.c.priority == int(RunPriority.INTERACTIVE))
        else:
            parts.append(runs.c.priority != int(RunPriority.INTERACTIVE))
    return or_(*parts)


class PostgresRunQueue:
    """See ``scheduling.ports.runtime.RunQueue``."""

    def __init__(
        self,
        uow_factory: PostgresUnitOfWorkFactory,
        capacity: QueueCapacity,
        probe: Probe | None = None,
        classes: frozenset[RunPriority] = frozenset(RunPriority),
    ) -> None:
        """``classes`` restricts what this queue client claims: production runs
        interactive and async workers on disjoint classes (spec "Configuration")."""
        self._uow = uow_factory
        self.capacity = capacity
        self.classes = classes
        self._probe = probe or NullProbe()

    async def _counts(self, uow: PostgresUnitOfWork, now: datetime) -> tuple[int, int]:
        interactive = runs.c.priority == int(RunPriority.INTERACTIVE)
        query = select(
            func.count().filter(interactive),
            func.count().filter(~interactive),
        ).where(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at > now)
        row = (await uow.tx.execute(query)).one()
        return int(row[0]), int(row[1])

    async def running_counts(self, now: datetime) -> tuple[int, int]:
        async with self._uow.begin() as uow:
            return await self._counts(uow, now)

    async def claim(self, owner: str, now: datetime, lease_seconds: float) -> ClaimedRun | None:
        async with self._uow.begin() as uow:
            await uow.tx.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": QUEUE_LOCK_KEY}
            )
            running_interactive, running_async = await self._counts(uow, now)
            admitted = [
                cls
                for cls in (RunPriority.INTERACTIVE, RunPriority.ASYNC)
                if cls in self.classes
                and self.capacity.admits(cls, running_interactive, running_async)
            ]
            if not admitted:
                return None
            eligible = or_(
                runs.c.status == RunStatus.QUEUED.value,
                and_(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at <= now),
            )
            pick = (
                select(runs.c.id, runs.c.status)
                .where(eligible, runs.c.scheduled_for <= now, _class_filter(admitted))
                .order_by(runs.c.priority, runs.c.scheduled_for, runs.c.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            picked = (await uow.tx.execute(pick)).first()
            if picked is None:
                return None
            expires = now + timedelta(seconds=lease_seconds)
            row = (
                await uow.tx.execute(
                    update(runs)
                    .where(runs.c.id == picked.id)
                    .values(
                        status=RunStatus.RUNNING.value,
                        lease_owner=owner,
                        lease_expires_at=expires,
                        fencing_token=runs.c.fencing_token + 1,
                        updated_at=now,
                        # Claim facts (ADR 1512): the first claim's instant, and one
                        # more reclaim when the previous lease had expired.
                        first_claimed_at=func.coalesce(runs.c.first_claimed_at, now),
                        lease_reclaims=runs.c.lease_reclaims
                        + int(picked.status == RunStatus.RUNNING.value),
                    )
                    .returning(*runs.c)
                )
            ).one()
            run = _to_run(row)
            checkpoints = await uow.runs.checkpoints(run.id)
            await uow.commit()
        await self._probe.step("run.claimed")
        return ClaimedRun(
            run=run,
            lease=Lease(run.id, owner, run.fencing_token, expires),
            checkpoint=checkpoints[-1] if checkpoints else None,
            recovered=picked.status == RunStatus.RUNNING.value,
            claimed_at=now,
        )
