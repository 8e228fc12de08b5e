"""The durable lane's test of the test: a materializer that splits its transaction.

The durable facet of materialize_atomic crashes the PostgreSQL server itself after
every write of one materialization (``simulation.scenarios.durable``, the simulator's
``crash_server`` fault kind on a durable private cluster). ``split`` makes a
materializer commit occurrence, session and run in a transaction of their own right
after the run's insert, the plausible mistake the lane must catch: those rows then
survive a crash at any later write.
"""

from __future__ import annotations

from typing import Any

from scheduling.adapters.postgres.uow import PostgresUnitOfWork
from scheduling.ports.materialization import MaterializationStore, QueuedRun
from scheduling.ports.unit_of_work import UnitOfWork
from scheduling.service.materializer import ScheduleMaterializer


class _SplitCommitStore:
    """Wrong on purpose: commits the transaction right after the run's insert (the
    occurrence, session and run then survive a crash at any later write)."""

    def __init__(self, inner: MaterializationStore, role: str | None) -> None:
        self._inner, self._role = inner, role

    async def create_run(self, uow: UnitOfWork, queued: QueuedRun) -> None:
        await self._inner.create_run(uow, queued)
        assert isinstance(uow, PostgresUnitOfWork)
        # The unit of work owns its server transaction (ADR 2160): end it and begin
        # another on the same connection, as the scheduler role again.
        await uow.tx.commit()
        await uow.tx.open({"role": self._role} if self._role is not None else {})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def split(materializer: ScheduleMaterializer, role: str | None) -> None:
    """Make ``materializer`` commit its run before the rest of the transaction."""
    materializer._store = _SplitCommitStore(materializer._store, role)
