"""Test of the test for gate.schedule.authority_fresh: a long-lived worker that caches
authority (the first answer per principal, forever) fires the due occurrence after a
revocation. The gate's one long-lived worker, warmed by an occurrence under the old
authority, now catches it in every case. The cache sits where the materializer reads
authority: the hot-path store's one in-transaction snapshot (ADR 1700)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gates.checks.test_authority_fresh import CASES, check_fails_closed
from gates.runner.pytest_plugin import GateEvidence
from scheduling.service.materializer import ScheduleMaterializer
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


class CachingAuthority:
    """Wraps the materializer's store: authority is read once per principal, forever
    (agent and overlap state stay fresh, so only the authority read is wrong)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._cache: dict[tuple[str, str], Any] = {}

    async def context(self, uow: Any, schedule: Any, revision: Any) -> Any:
        fresh = await self._inner.context(uow, schedule, revision)
        key = (schedule.tenant_id, schedule.principal_id)
        if key not in self._cache:
            self._cache[key] = fresh.authority
        return replace(fresh, authority=self._cache[key])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def caching(h: MaterializeWorld) -> ScheduleMaterializer:
    materializer = h.materializer()
    materializer._store = CachingAuthority(materializer._store)
    return materializer


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_worker_caching_authority_fails_the_gate(pg_url: str, case: str) -> None:
    with pytest.raises(AssertionError):
        await check_fails_closed(pg_url, case, GateEvidence(), caching)
