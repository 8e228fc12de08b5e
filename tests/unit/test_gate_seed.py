"""``gate_seed``: the gate run's seed from ``SCHEDULING_GATE_SEED``, else the default."""

from __future__ import annotations

import pytest

from gates.runner.pytest_plugin import SEED_ENV, gate_seed


def test_unset_or_blank_falls_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SEED_ENV, raising=False)
    assert gate_seed(7) == 7
    monkeypatch.setenv(SEED_ENV, "  ")
    assert gate_seed(7) == 7


def test_the_runner_seed_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_ENV, "3141592653")
    assert gate_seed(7) == 3141592653


def test_a_seed_that_is_not_an_integer_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SEED_ENV, "seven")
    with pytest.raises(pytest.UsageError, match=SEED_ENV):
        gate_seed(7)
