"""Test of the test: a decision store that raises on a decided instant (instead of
returning the committed occurrence) is caught by gate.schedule.materialize_once, not
only by the adapter contract. Since ADR 2330 the occurrence is inserted by the
decision's one statement (``PostgresMaterializationRepository.decide``)."""

from __future__ import annotations

from typing import Any

import pytest

from gates.checks.test_materialize_uniqueness import check_uniqueness_race
from gates.runner.pytest_plugin import GateEvidence
from scheduling.adapters.postgres import materialization as module
from scheduling.domain.errors import ConflictError

pytestmark = pytest.mark.postgres


async def test_an_insert_raising_on_a_decided_instant_fails_the_gate(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = module.PostgresMaterializationRepository.decide

    async def raising(self: Any, decision: Any) -> Any:
        stored = await real(self, decision)
        if stored.id != decision.occurrence.id:
            raise ConflictError("schedule.occurrence.duplicate", "instant already decided")
        return stored

    monkeypatch.setattr(module.PostgresMaterializationRepository, "decide", raising)
    # The strict worker raises SwallowedScanErrors (an AssertionError) on the error.
    with pytest.raises(AssertionError):
        await check_uniqueness_race(pg_url, GateEvidence())


async def test_the_real_insert_passes(pg_url: str) -> None:
    await check_uniqueness_race(pg_url, GateEvidence())
