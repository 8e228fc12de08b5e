"""The model tools over the MCP edge, served for real (issue 22).

Facets of three model-tool gates driven by the ``mcp`` package's own client over
streamable HTTP on 127.0.0.1 against PostgreSQL, the edge built by
``bootstrap.build_mcp`` and authenticated by the token file (see ``mcp_support``):

* gate.schedule.model_create_happy_path: the call waits for the approval elicited from
  the client (no schedule exists while the question is open), persists one definition
  when approved, and nothing when declined, cancelled, or accepted with ``false``, a
  truthy non-boolean or an empty form; a
  client that cannot elicit fails closed; an elicitation answered with an error is no
  answer (the retryable approval_timeout, nothing decided) and the same key asks again;
  the text the model reads is the output in the bytes the pipeline measured, and every
  failure is flagged ``isError``;
* gate.schedule.model_lifecycle_contract: tools/list tells a client what the spec's
  classification says: only schedule.list is read-only and takes no idempotency key,
  only schedule.cancel is destructive, every other requires the key;
* gate.schedule.model_lifecycle_authorization: an approved pause (still ACTIVE at the
  question), another tenant's pause (not found, nothing changed), a missing scope
  (denied before any elicitation); an unknown or absent token, the owner's token under
  another scheme than Bearer and a disabled principal's token (no session); a numeric
  idempotency key (refused, nothing asked or written). Over stdio (the token given once
  at start): a token revoked in the file, a scope removed and a principal disabled
  each stop the next call on the same connection. Every tool that needs approval
  (create, update, pause, resume, cancel) from a client that declared no elicitation
  or only URL mode: elicitation_unsupported, nothing asked or written; a client that
  declared the first revision's empty object is asked in form mode.
"""

from __future__ import annotations

import pytest

from gates.checks.mcp_support import (
    OWNER,
    McpWorld,
    advertisement_problems,
    mcp_authorization_check,
    mcp_create_check,
    mcp_elicitation_capability_check,
    mcp_stdio_check,
)
from gates.runner.pytest_plugin import GateEvidence


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_create_happy_path")
async def test_mcp_create_waits_for_the_elicited_approval(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world:
        problems, evidence = await mcp_create_check(world)
    assert problems == [], problems
    for key, value in evidence.items():
        gate_evidence.record(key, value)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_authorization")
async def test_mcp_lifecycle_has_exact_authority_across_tenants(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world:
        problems, evidence = await mcp_authorization_check(world)
    assert problems == [], problems
    for key, value in evidence.items():
        gate_evidence.record(key, value)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_authorization")
async def test_mcp_stdio_resolves_its_start_token_on_every_call(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world:
        problems, evidence = await mcp_stdio_check(world)
    assert problems == [], problems
    for key, value in evidence.items():
        gate_evidence.record(key, value)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_authorization")
async def test_mcp_client_without_form_elicitation_changes_nothing(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world:
        problems, evidence = await mcp_elicitation_capability_check(world)
    assert problems == [], problems
    for key, value in evidence.items():
        gate_evidence.record(key, value)


@pytest.mark.postgres
@pytest.mark.gate("gate.schedule.model_lifecycle_contract")
async def test_mcp_advertises_each_tool_as_the_spec_classifies_it(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    async with McpWorld.serving(pg_url) as world, world.session(OWNER) as session:
        tools = (await session.list_tools()).tools
    problems = advertisement_problems(tools)
    assert problems == [], problems
    gate_evidence.record(
        "annotations",
        {
            t.name: [t.annotations.readOnlyHint, t.annotations.destructiveHint]
            for t in tools
            if t.annotations is not None
        },
    )
