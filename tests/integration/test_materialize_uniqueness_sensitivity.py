"""Test of the test: an occurrence insert that raises on a decided instant (instead of
returning the committed occurrence) is now caught by gate.schedule.materialize_once,
not only by the adapter contract."""

from __future__ import annotations

from typing import Any

import pytest

from gates.checks.test_materialize_uniqueness import check_uniqueness_race
from gates.runner.pytest_plugin import GateEvidence
from scheduling.adapters.postgres.repositories import occurrences as module
from scheduling.domain.errors import ConflictError

pytestmark = pytest.mark.postgres


async def test_an_insert_raising_on_a_decided_instant_fails_the_gate(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = module.PostgresOccurrenceRepository.insert

    async def raising(self: Any, occurrence: Any) -> Any:
        stored = await real(self, occurrence)
        if stored.id != occurrence.id:
            raise ConflictError("schedule.occurrence.duplicate", "instant already decided")
        return stored

    monkeypatch.setattr(module.PostgresOccurrenceRepository, "insert", raising)
    # The strict worker raises SwallowedScanErrors (an AssertionError) on the error.
    with pytest.raises(AssertionError):
        await check_uniqueness_race(pg_url, GateEvidence())


async def test_the_real_insert_passes(pg_url: str) -> None:
    await check_uniqueness_race(pg_url, GateEvidence())
