"""What the user approves is exactly what executes, at full length; place_call fails closed.

On PostgreSQL through the ordinary tool pipeline (``ToolWorld``):

* gate.schedule.model_create_happy_path: a create whose title is the longest legal
  (200 characters) and whose instruction is long (5,000 characters) is asked with a
  view carrying both whole - never a preview or a cut title - and the stored revision
  carries exactly the approved text. ``place_call=true`` (1.3.0) while calling is not
  composed is ``schedule.calling_unavailable`` before anyone is asked: no schedule, and
  never one that delegates the calling scopes (the gate: "delegates no tool scopes").
* gate.schedule.model_update_happy_path: an edit's view shows the complete supplied
  patch (a 200-character title, a 5,000-character instruction), and the new revision
  stores exactly that text.
* gate.schedule.model_create_validation: a call pinned to a version the build does not
  serve is ``schedule.tool.unknown`` - never run as the newest version - with nothing
  asked or written.

Tests of the test: ``scheduling-gates mutate`` (``tools.create_view_instruction_preview``,
``tools.create_view_title_cut``, ``tools.update_view_instruction_preview``,
``tools.update_view_title_cut``, ``tools.place_call_ignored``,
``tools.place_call_delegates_calling_scopes``, ``pipeline.unknown_version_runs_newest``).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from gates.checks.tool_checks import create_via_tool, last_view
from gates.checks.tool_support import ToolWorld
from scheduling.domain.cadence import format_instant

pytestmark = pytest.mark.postgres

# Deterministic long texts: the longest legal title and a long instruction whose tail
# differs from its head, so any cut or preview shows.
TITLE = ("Water the garden and check the roses " * 6)[:199] + "!"
INSTRUCTION = "".join(f"step {n:04d}: keep going. " for n in range(250)) + "THE END"


def test_the_texts_are_long_enough_to_be_cut() -> None:
    assert len(TITLE) == 200
    assert len(INSTRUCTION) > 5000


@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_create_view_shows_the_whole_title_and_instruction(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        at = world.later(days=1)
        args = {"title": TITLE, "instruction": INSTRUCTION, "at": at}
        result = await world.call("schedule.create", args, "long-view")
        assert result.ok, (result.reason_code, result.details)
        assert result.output is not None
        want = {
            "title": TITLE,
            "instruction": INSTRUCTION,
            "at": format_instant(datetime.fromisoformat(at)),
            "requested_scopes": [],
        }
        assert last_view(world) == want
        (revision,) = await world.revisions(result.output["schedule_id"])
        stored = revision["definition"]
        assert (stored["title"], stored["instruction"]) == (TITLE, INSTRUCTION)
    finally:
        await world.close()


@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_place_call_fails_closed_and_delegates_nothing(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        before = await world.snapshot()
        args = {
            "title": "Call the dentist",
            "instruction": "Call the dentist and book a cleaning.",
            "at": world.later(days=1),
            "place_call": True,
        }
        result = await world.call("schedule.create", args, "place-call", version="1.3.0")
        revisions = await world.sql("SELECT definition FROM schedule_revisions")
        delegated = [r["definition"]["requested_scopes"] for r in revisions]
        assert not any(delegated), f"a conversational create delegated scopes {delegated}"
        assert not result.ok, "place_call=true created a schedule without calling"
        assert result.reason_code == "schedule.calling_unavailable", result.reason_code
        assert not result.retryable
        assert not world.approvals.requests, "place_call=true was asked for approval"
        after = await world.snapshot()
        assert {t: after[t] for t in after if t != "tool_invocations"} == {
            t: before[t] for t in before if t != "tool_invocations"
        }
    finally:
        await world.close()


@pytest.mark.gate("gate.schedule.model_update_happy_path")
async def test_update_view_shows_the_whole_supplied_patch(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        sid = await create_via_tool(world, "Digest", "long-c")
        patch = {"title": TITLE, "instruction": INSTRUCTION}
        args = {"schedule_id": sid, "expected_revision": 1, **patch}
        result = await world.call("schedule.update", args, "long-u")
        assert result.ok, (result.reason_code, result.details)
        want = {
            "schedule_id": sid,
            "expected_revision": 1,
            "patch": patch,
            "unchanged": ["cadence"],
        }
        assert last_view(world) == want
        latest = (await world.revisions(sid))[-1]
        assert latest["revision"] == 2
        stored = latest["definition"]
        assert (stored["title"], stored["instruction"]) == (TITLE, INSTRUCTION)
    finally:
        await world.close()


@pytest.mark.gate("gate.schedule.model_create_validation")
async def test_an_unserved_version_is_unknown_not_the_newest(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        before = await world.snapshot()
        args = {"title": "Pinned", "instruction": "Pinned call.", "at": world.later(days=1)}
        result = await world.call("schedule.create", args, "pinned-999", version="9.9.9")
        assert not result.ok, f"a call pinned to 9.9.9 ran as {result.version}"
        assert result.reason_code == "schedule.tool.unknown", result.reason_code
        assert not world.approvals.requests, "a call to an unserved version was asked"
        assert await world.snapshot() == before
    finally:
        await world.close()
