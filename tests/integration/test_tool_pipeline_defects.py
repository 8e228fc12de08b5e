"""Issue 22's product defects of the governed tool pipeline, each reproduced on real
PostgreSQL through the pipeline ``bootstrap.build_tools`` builds:

1. a call approved on one view, crashed between the approval commit and the effect,
   and retried with the same key after the view changed, must not run the new view
   (``schedule.tool.approval_stale``, ADR 2101);
3. a retry with the same key and identical *normalized* arguments (selectors in
   another order, ``HH:MM`` for ``HH:MM:SS``, the same instant in another offset)
   replays; different content is still ``schedule.idempotency.key_reused``;
4. the ``schedule.list`` cursor is sealed (ADR 2103): not base64 JSON of the keyset,
   and a tampered, truncated, foreign-principal or foreign-tenant cursor fails with
   ``schedule.page.invalid_cursor`` and no effect;
7. NUL or a lone surrogate anywhere in the arguments is a non-retryable
   ``schedule.text.invalid`` before approval: nobody is asked, nothing is written.

(Defect 2, the create versions, is in ``tests/unit/test_tool_pipeline.py``.)
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from sqlalchemy import text

from scheduling.adapters.memory.tool_ledger import ConfiguredWebsiteBindings
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.bootstrap import ToolsRole, build_tools
from scheduling.config import Settings
from scheduling.domain.identity import Principal
from scheduling.domain.paging import encode_cursor
from scheduling.ports.directories import BrowserProfile, BrowserProfileState
from scheduling.ports.tool_ledger import WebsiteBinding
from scheduling.runtime.tool_pipeline import (
    ScriptedApprovals,
    ToolExecutionContext,
    ToolResult,
    ToolStatus,
)
from scheduling.testing import storage_over
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import AGENT_ID, START, TENANT_B, WORLD_ENV, principal, seed_durable

pytestmark = pytest.mark.postgres

WHO = principal("defect-owner")
OTHER = principal("defect-other")
WHO_B = principal(WHO.principal_id, tenant_id=TENANT_B)
SESSION = UUID("1f6a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b")
P1 = UUID("0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
P2 = UUID("1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e")
TABLES = (
    "schedules",
    "schedule_revisions",
    "schedule_idempotency_keys",
    "process_events",
    "tool_invocations",
    "tool_approval_requests",
    "tool_approval_decisions",
)


class Crash(Exception):
    """The process died (raised once by a patched service method)."""


@dataclass
class Tools:
    role: ToolsRole
    admin: PostgresUnitOfWorkFactory
    approvals: ScriptedApprovals
    websites: ConfiguredWebsiteBindings
    clock: VirtualClock

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        key: str,
        *,
        who: Principal = WHO,
        version: str | None = None,
    ) -> ToolResult:
        context = ToolExecutionContext(who, key, session_id=SESSION)
        return await self.role.pipeline.call(name, arguments, context, version=version)

    async def sql(self, statement: str, **params: Any) -> list[dict[str, Any]]:
        async with self.admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []

    async def counts(self) -> dict[str, int]:
        return {
            table: int((await self.sql(f"SELECT count(*) AS n FROM {table}"))[0]["n"])
            for table in TABLES
        }

    def profile(self, profile_id: UUID, origin: str) -> None:
        assert self.role.api is not None
        self.role.api.profiles.put(
            BrowserProfile(
                profile_id, WHO.tenant_id, WHO.principal_id, BrowserProfileState.READY, (origin,)
            )
        )


@pytest.fixture
async def tools(pg_url: str) -> AsyncIterator[Tools]:
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=3)
    await seed_durable(admin, [WHO, OTHER, WHO_B], at=START)
    clock = VirtualClock(START)
    approvals = ScriptedApprovals()
    websites = ConfiguredWebsiteBindings()
    env = {
        **WORLD_ENV,
        "AGENT_SCHEDULE_DATABASE_URL": pg_url,
        "AGENT_SCHEDULE_ROLE_PREFIX": role_names().owner.removesuffix("_owner"),
    }
    role = build_tools(
        Settings.from_env(env),
        clock=clock,
        ids=SeededIds("defects"),
        approvals=approvals,
        default_agent_id=AGENT_ID,
        website_bindings=websites,
        storage=storage_over(admin),
    )
    try:
        yield Tools(role, admin, approvals, websites, clock)
    finally:
        await role.close()
        await admin.dispose()


def daily(**overrides: Any) -> dict[str, Any]:
    return {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris", **overrides}


def create_args(**overrides: Any) -> dict[str, Any]:
    """Valid create arguments; ``at=...`` replaces the cadence."""
    base: dict[str, Any] = {"title": "Briefing", "instruction": "Summarize the news."}
    if "at" not in overrides:
        base["cadence"] = daily()
    return {**base, **overrides}


# ------------------------------------------------------------------ 1. approval bypass


def crash_the_first_create(tools: Tools) -> None:
    """The service's next create raises ``Crash`` (the process died after the approval
    committed); the ones after it run."""
    assert tools.role.api is not None
    service = tools.role.api.service
    real_create = service.create
    crashed: list[bool] = []

    async def crash_once(*args: Any, **kwargs: Any) -> Any:
        if not crashed:
            crashed.append(True)
            raise Crash("the process died after the approval committed")
        return await real_create(*args, **kwargs)

    service.create = crash_once  # type: ignore[method-assign]


async def test_a_crashed_approved_call_does_not_run_a_changed_view(tools: Tools) -> None:
    tools.profile(P1, "https://one.example")
    tools.profile(P2, "https://two.example")
    tools.websites.bind(WHO, SESSION, WebsiteBinding(P1, ("https://one.example",)))
    crash_the_first_create(tools)
    arguments = create_args(use_website=True)
    with pytest.raises(Crash):
        await tools.call("schedule.create", arguments, "site-1", version="1.2.0")
    [request] = tools.approvals.requests
    assert request.view["website"]["browser_profile_id"] == str(P1)
    [row] = await tools.sql("SELECT state FROM tool_invocations")
    assert row["state"] == "APPROVED"
    # The chat's binding changes to P2 before the retry with the same key.
    tools.websites.bind(WHO, SESSION, WebsiteBinding(P2, ("https://two.example",)))
    retry = await tools.call("schedule.create", arguments, "site-1", version="1.2.0")
    assert retry.status is ToolStatus.FAILED
    assert retry.reason_code == "schedule.tool.approval_stale"
    assert not retry.retryable
    assert len(tools.approvals.requests) == 1
    assert await tools.sql("SELECT * FROM schedules") == []
    # Fail closed for good: the key now replays the stale failure, even with P1 back.
    tools.websites.bind(WHO, SESSION, WebsiteBinding(P1, ("https://one.example",)))
    again = await tools.call("schedule.create", arguments, "site-1", version="1.2.0")
    assert again.reason_code == "schedule.tool.approval_stale"
    assert again.replayed
    assert await tools.sql("SELECT * FROM schedules") == []


async def test_a_crashed_approved_call_resumes_its_unchanged_view(tools: Tools) -> None:
    tools.profile(P1, "https://one.example")
    tools.websites.bind(WHO, SESSION, WebsiteBinding(P1, ("https://one.example",)))
    crash_the_first_create(tools)
    arguments = create_args(use_website=True)
    with pytest.raises(Crash):
        await tools.call("schedule.create", arguments, "site-2", version="1.2.0")
    done = await tools.call("schedule.create", arguments, "site-2", version="1.2.0")
    assert done.ok, done.reason_code
    assert len(tools.approvals.requests) == 1
    [schedule] = await tools.sql("SELECT id FROM schedules")
    assert done.output is not None
    assert done.output["schedule_id"] == str(schedule["id"])


# ------------------------------------------------------------------ 3. normalized retry


async def test_identical_normalized_arguments_replay(tools: Tools) -> None:
    weekly = {"kind": "WEEKLY", "local_time": "08:00", "timezone": "Europe/Paris"}
    first = await tools.call(
        "schedule.create", create_args(cadence={**weekly, "weekdays": [1, 3, 5]}), "n-1"
    )
    assert first.ok, first.reason_code
    same = create_args(cadence={**weekly, "weekdays": [5, 1, 3], "local_time": "08:00:00"})
    again = await tools.call("schedule.create", same, "n-1")
    assert again.ok, again.reason_code
    assert again.replayed
    assert again.output is not None
    assert first.output is not None
    assert again.output["schedule_id"] == first.output["schedule_id"]
    # One instant, two spellings.
    at = await tools.call("schedule.create", create_args(at="2026-03-05T10:00:00+01:00"), "n-2")
    assert at.ok, at.reason_code
    at_again = await tools.call("schedule.create", create_args(at="2026-03-05T09:00:00Z"), "n-2")
    assert at_again.replayed, at_again.reason_code
    # The update's patch and the transitions' ids normalize too.
    sid = first.output["schedule_id"]
    patch = {"schedule_id": sid, "expected_revision": 1, "cadence": {**weekly, "weekdays": [2, 4]}}
    updated = await tools.call("schedule.update", patch, "n-3")
    assert updated.ok, updated.reason_code
    patch_again = {
        "schedule_id": sid.upper(),
        "expected_revision": 1,
        "cadence": {**weekly, "weekdays": [4, 2], "local_time": "08:00:00"},
    }
    assert (await tools.call("schedule.update", patch_again, "n-3")).replayed
    paused = await tools.call("schedule.pause", {"schedule_id": sid, "expected_revision": 2}, "n-4")
    assert paused.ok, paused.reason_code
    upper = {"schedule_id": sid.upper(), "expected_revision": 2}
    assert (await tools.call("schedule.pause", upper, "n-4")).replayed
    assert len(await tools.sql("SELECT id FROM schedules")) == 2
    # Different content under the same key is still refused, with no effect.
    other = create_args(cadence={**weekly, "weekdays": [1, 3]})
    reused = await tools.call("schedule.create", other, "n-1")
    assert reused.reason_code == "schedule.idempotency.key_reused"
    # Invalid arguments still fail with their own stable code.
    duplicate = create_args(cadence={**weekly, "weekdays": [1, 1]})
    invalid = await tools.call("schedule.create", duplicate, "n-5")
    assert invalid.status is ToolStatus.FAILED
    assert invalid.reason_code is not None
    assert invalid.reason_code.startswith("schedule.cadence.")
    assert not invalid.retryable
    assert len(await tools.sql("SELECT id FROM schedules")) == 2


# ------------------------------------------------------------------ 4. opaque cursor


def _decodes_to_json(cursor: str) -> bool:
    try:
        json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return False
    return True


async def test_the_list_cursor_is_sealed_and_bound_to_its_principal(tools: Tools) -> None:
    for n in range(3):
        made = await tools.call("schedule.create", create_args(title=f"S{n}"), f"c-{n}")
        assert made.ok, made.reason_code
    first = await tools.call("schedule.list", {"limit": 1}, "l-1")
    assert first.ok, first.reason_code
    assert first.output is not None
    cursor = first.output["next_cursor"]
    assert isinstance(cursor, str)
    assert not _decodes_to_json(cursor)
    second = await tools.call("schedule.list", {"limit": 1, "cursor": cursor}, "l-2")
    assert second.ok, second.reason_code
    assert second.output is not None
    assert second.output["items"][0]["schedule_id"] != first.output["items"][0]["schedule_id"]
    before = await tools.counts()
    flipped = cursor[:-3] + ("A" if cursor[-3] != "A" else "B") + cursor[-2:]
    # The previous format: unsigned base64 JSON wrapping a (here invented) keyset.
    forged = encode_cursor("tool.schedule.list", [encode_cursor("schedules", ["x", "y"])])
    cases = {
        "tampered": (WHO, flipped),
        "truncated": (WHO, cursor[: len(cursor) // 2]),
        "foreign principal": (OTHER, cursor),
        "foreign tenant": (WHO_B, cursor),
        "unsigned": (WHO, forged),
    }
    for label, (who, bad) in cases.items():
        result = await tools.call("schedule.list", {"limit": 1, "cursor": bad}, "l-x", who=who)
        assert result.status is ToolStatus.FAILED, label
        assert result.reason_code == "schedule.page.invalid_cursor", (label, result.reason_code)
        assert not result.retryable, label
        assert result.output is None, label
    assert await tools.counts() == before


# ------------------------------------------------------------------ 7. bad text


@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize("where", ["title", "instruction", "timezone", "key"])
async def test_bad_text_fails_before_approval_and_writes_nothing(
    tools: Tools, bad: str, where: str
) -> None:
    arguments = create_args()
    if where == "timezone":
        arguments["cadence"] = daily(timezone=f"Europe/Paris{bad}")
    elif where == "key":
        arguments[f"title{bad}"] = "x"
    else:
        arguments[where] = f"Morning {bad} words"
    before = await tools.counts()
    result = await tools.call("schedule.create", arguments, f"text-{where}")
    assert result.status is ToolStatus.FAILED
    assert result.reason_code == "schedule.text.invalid"
    assert not result.retryable
    assert "sqlstate" not in json.dumps(result.to_json(), ensure_ascii=True).lower()
    assert tools.approvals.requests == []
    assert await tools.counts() == before
    # The same for a patch of an existing schedule.
    made = await tools.call("schedule.create", create_args(), f"ok-{where}")
    assert made.ok, made.reason_code
    assert made.output is not None
    asked = len(tools.approvals.requests)
    patch: dict[str, Any] = {"schedule_id": made.output["schedule_id"], "expected_revision": 1}
    if where == "timezone":
        patch["cadence"] = arguments["cadence"]
    elif where == "key":
        patch[f"title{bad}"] = "x"
    else:
        patch[where] = arguments[where]
    after = await tools.counts()
    updated = await tools.call("schedule.update", patch, f"text-u-{where}")
    assert updated.reason_code == "schedule.text.invalid", patch.keys()
    assert len(tools.approvals.requests) == asked
    assert await tools.counts() == after
