"""Test of the test for gate.schedule.authority_fresh: a long-lived worker whose
principal directory caches authority (the first answer per principal, forever) fires
the due occurrence after a revocation. The gate's one long-lived worker, warmed by an
occurrence under the old authority, now catches it in every case."""

from __future__ import annotations

from typing import Any

import pytest

from gates.checks.test_authority_fresh import CASES, check_fails_closed
from gates.runner.pytest_plugin import GateEvidence
from scheduling.service.materializer import ScheduleMaterializer
from simulation.worlds.materialize import Harness

pytestmark = pytest.mark.postgres


class CachingDirectory:
    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._cache: dict[tuple[str, str], Any] = {}

    async def current(self, tenant_id: str, principal_id: str) -> Any:
        key = (tenant_id, principal_id)
        if key not in self._cache:
            self._cache[key] = await self._inner.current(tenant_id, principal_id)
        return self._cache[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def caching(h: Harness) -> ScheduleMaterializer:
    materializer = h.materializer()
    materializer._principals = CachingDirectory(materializer._principals)  # type: ignore[assignment]
    return materializer


@pytest.mark.parametrize("case", sorted(CASES))
async def test_a_worker_caching_authority_fails_the_gate(pg_url: str, case: str) -> None:
    with pytest.raises(AssertionError):
        await check_fails_closed(pg_url, case, GateEvidence(), caching)
