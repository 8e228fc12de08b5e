"""The MCP edge shows the whole approval view and maps a lost ledger to a retryable code.

Served for real (``McpWorld``: streamable HTTP on 127.0.0.1, PostgreSQL, the edge built
by ``bootstrap.build_mcp``):

* gate.schedule.model_create_happy_path: the elicitation a client answers carries the
  approval view whole - the longest legal title and a 5,000-character instruction, not
  a preview - and the approved create stores exactly that text.
* gate.schedule.model_create_retry: when the tool ledger is unavailable at the call
  (the pipeline's port raises ``schedule.persistence.unavailable``), the client gets
  that stable code flagged ``retryable: true`` with nothing written; the retry with the
  same key then creates the schedule once.

* gate.schedule.model_lifecycle_contract: tools/list advertises each tool's registered
  closed input schema unchanged (its ``required`` fields and closure kept), plus only
  the ``idempotency_key`` property (required for every tool with an effect), and
  advertising never adds that field to the registered schema the pipeline validates.

Tests of the test: ``scheduling-gates mutate`` (``mcp.elicitation_instruction_preview``,
``mcp.port_failure_not_retryable``, ``mcp.port_failure_internal``,
``mcp.advertised_required_overwritten``, ``mcp.advertised_schema_shallow_copy``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gates.checks.mcp_support import (
    DURABLE_TABLES,
    OWNER,
    Elicitations,
    McpWorld,
    accept,
    code,
    payload,
)
from gates.checks.test_rules_tools_views import INSTRUCTION, TITLE
from scheduling.domain.errors import UnavailableError
from scheduling.ports.repositories import UNAVAILABLE

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_the_elicitation_shows_the_whole_view(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        asks = Elicitations(default=accept(True))
        args = {
            "title": TITLE,
            "instruction": INSTRUCTION,
            "at": world.later(days=1),
            "idempotency_key": "long-elicited",
        }
        async with world.session(OWNER, asks) as session:
            made = await session.call_tool("schedule.create", args)
        assert not made.isError, payload(made)
        assert len(asks.seen) == 1
        view = asks.seen[0].get("view", {})
        assert view.get("title") == TITLE, "the elicitation cut the title"
        assert view.get("instruction") == INSTRUCTION, "the elicitation showed a preview"
        row = await world.schedule(payload(made)["schedule_id"])
        assert row is not None
        assert row["title"] == TITLE


@pytest.mark.gate("gate.schedule.model_create_retry")
async def test_a_lost_ledger_is_a_retryable_stable_failure(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        ledger = world.role.tools.ledger
        assert ledger is not None
        original = ledger.find
        failures = [UnavailableError(UNAVAILABLE, "the database is unavailable")]

        async def find(*a: Any, **k: Any) -> Any:
            if failures:
                raise failures.pop()
            return await original(*a, **k)

        ledger.find = find  # type: ignore[method-assign]
        args = {
            "title": "Flaky",
            "instruction": "Remind me.",
            "at": world.later(days=1),
            "idempotency_key": "lost-ledger",
        }
        asks = Elicitations(default=accept(True))
        try:
            before = await world.snapshot(DURABLE_TABLES)
            async with world.session(OWNER, asks) as session:
                lost = await session.call_tool("schedule.create", args)
                after = await world.snapshot(DURABLE_TABLES)
                again = await session.call_tool("schedule.create", args)
        finally:
            ledger.find = original  # type: ignore[method-assign]
        error = payload(lost).get("error", {})
        assert code(lost) == UNAVAILABLE, payload(lost)
        assert error.get("retryable") is True, f"{UNAVAILABLE} not retryable: {payload(lost)}"
        assert after == before, "a failed call wrote"
        assert not again.isError, payload(again)
        rows = [r for r in await world.schedules() if r["title"] == "Flaky"]
        assert len(rows) == 1


@pytest.mark.gate("gate.schedule.model_lifecycle_contract")
async def test_tools_list_advertises_the_registered_schemas(pg_url: str) -> None:
    async with McpWorld.serving(pg_url) as world:
        registry = world.role.tools.registry
        before = {
            name: copy.deepcopy(registered.spec.input_schema)
            for name in registry.names()
            if (registered := registry.get(name)) is not None
        }
        async with world.session(OWNER) as session:
            tools = (await session.list_tools()).tools
        assert sorted(t.name for t in tools) == sorted(before)
        for tool in tools:
            spec = before[tool.name]
            advertised = copy.deepcopy(tool.inputSchema)
            key = advertised.get("properties", {}).pop("idempotency_key", None)
            assert key is not None, f"{tool.name}: no idempotency_key advertised"
            required = list(advertised.get("required", []))
            keyed = "idempotency_key" in required
            assert keyed is (tool.name != "schedule.list"), f"{tool.name}: required {required}"
            if keyed:
                required.remove("idempotency_key")
            if required or "required" in spec:
                advertised["required"] = required
            assert advertised == spec, f"{tool.name}: advertised {advertised}, registered {spec}"
            current = registry.get(tool.name)
            assert current is not None
            assert current.spec.input_schema == spec, f"{tool.name}: listing changed its schema"
