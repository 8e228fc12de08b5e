"""``memo.cadence_of`` (ADR 2620): a list row's cadence text decoded once, and every
caller handed its own copy, so a caller that changes its dict changes no later row."""

from __future__ import annotations

import json

import pytest

from scheduling.adapters.postgres import memo

WEEKLY = '{"kind": "WEEKLY", "timezone": "Asia/Tokyo", "weekdays": [2, 5], "local_time": "06:30"}'


def test_equal_to_decoding_and_decoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    text = WEEKLY.replace("06:30", "06:31")  # a text no other test decoded
    calls: list[str] = []
    real = json.loads

    def counted(s: str) -> object:
        calls.append(s)
        return real(s)

    monkeypatch.setattr(json, "loads", counted)  # the module memo decodes with
    assert [memo.cadence_of(text) for _ in range(3)] == [real(text)] * 3
    assert calls == [text]


def test_each_caller_gets_its_own_copy() -> None:
    first = memo.cadence_of(WEEKLY)
    first["kind"] = "DAILY"
    first["weekdays"].append(7)
    again = memo.cadence_of(WEEKLY)
    assert again == json.loads(WEEKLY)
    assert again is not first
    assert again["weekdays"] is not first["weekdays"]
