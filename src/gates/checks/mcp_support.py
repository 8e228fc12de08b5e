"""The MCP edge served for real, for the MCP gate facet and its tests (not a test module).

``McpWorld.serving(url)`` seeds principals of two tenants and the default agent through
an admin login, issues their bearer tokens into a fresh token file the way
``scheduling tokens add`` does (the file keeps digests only), builds the edge
through the composition root (``bootstrap.build_mcp``: ``build_tools`` on PostgreSQL,
the API role by ``SET LOCAL ROLE`` over the world's URL, the edge's elicitation as the
approval port, ``edge_authenticator`` over the token file) and serves it with uvicorn
on 127.0.0.1 (streamable HTTP). ``McpWorld.session(principal, answer)`` is the ``mcp``
package's own client (``streamable_http_client`` + ``ClientSession``) with a bearer
header on every request and an elicitation callback, ``answer``, which may read the
database while the server waits for it.

``McpWorld.stdio(principal, answer)`` is the same client over the edge's own stdio
transport (``McpEdge.serve_stdio``, the token given once at start, as ``scheduling
mcp`` serves it) on two OS pipes; ``McpWorld.declaring`` a client that declares
exactly the elicitation capability given (URL only, or the first revision's empty
object). ``rewrite`` puts on the wire bytes no client library sends (invalid UTF-8).

A test of the test passes ``edge_type``: a plausible wrong edge (one that ignores a
decline, say) built and served the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from sqlalchemy import text

from gates.checks.tool_support import TOOL_TABLES, tool_env
from scheduling.bootstrap import McpRole, build_mcp, read_entries, revoke_token, token_file
from scheduling.config import Settings
from scheduling.domain.identity import Principal
from scheduling.mcp import McpEdge, serving
from scheduling.runtime.tool_pipeline import output_bytes
from scheduling.testing import PostgresUnitOfWorkFactory, issue_token
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import AGENT_ID, START, TENANT_B, principal, seed_durable

OWNER = principal("mcp-owner")
# Another tenant's principal with the same id: only the tenant tells them apart.
FOREIGN = principal(OWNER.principal_id, tenant_id=TENANT_B)
READER = principal("mcp-reader", scopes={"schedule.read"})
# Holds every scope; the authorization check revokes one after its first call, then
# disables it.
DISABLED = principal("mcp-disabled")
PRINCIPALS = (OWNER, FOREIGN, READER, DISABLED)
Row = dict[str, Any]
Reply = types.ElicitResult | types.ErrorData
Answer = Callable[[types.ElicitRequestParams], Awaitable[Reply]]


def accept(approve: bool = True) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approve": approve})


@dataclass
class Elicitations:
    """The client's elicitation callback: each request is kept (its message parsed)
    and answered by the next queued answer, else ``default`` (decline)."""

    answers: list[Answer] = field(default_factory=list)
    default: types.ElicitResult = field(
        default_factory=lambda: types.ElicitResult(action="decline")
    )
    seen: list[dict[str, Any]] = field(default_factory=list)

    def then(self, answer: Answer) -> None:
        self.answers.append(answer)

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> Reply:
        self.seen.append(json.loads(params.message))
        if not self.answers:
            return self.default
        return await self.answers.pop(0)(params)


def payload(result: types.CallToolResult) -> dict[str, Any]:
    """The one text block, parsed (a success: the tool output; a failure: the envelope)."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return dict(json.loads(block.text))


def text_bytes(result: types.CallToolResult) -> int:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return len(block.text.encode("utf-8"))


def code(result: types.CallToolResult) -> str | None:
    """The stable code of a failed call; ``None`` for a success, and for a failure the
    client is not told is one (``isError`` unset: the model would read it as a result)."""
    error = payload(result).get("error")
    return str(error.get("code")) if result.isError and isinstance(error, dict) else None


def issue(path: Path, who: Principal) -> str:
    """A bearer token for ``who`` in the token file, as ``scheduling tokens add`` writes
    it (that command runs its own event loop, so the world calls the same function)."""
    _, token = issue_token(path, who.tenant_id, who.principal_id, START)
    assert token not in path.read_text(encoding="utf-8")  # the file keeps digests only
    return token


class DeclaringSession(ClientSession):
    """The SDK's client declaring exactly ``elicitation`` at initialize (the SDK's own
    declares both form and url modes whenever it has a callback): a URL-only client, or
    one that declares the first revision's empty object (form mode)."""

    def __init__(self, *args: Any, elicitation: types.ElicitationCapability, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.elicitation = elicitation

    async def initialize(self) -> types.InitializeResult:
        params = types.InitializeRequestParams(
            protocolVersion=types.LATEST_PROTOCOL_VERSION,
            capabilities=types.ClientCapabilities(elicitation=self.elicitation),
            clientInfo=types.Implementation(name="declaring-client", version="1"),
        )
        result = await self.send_request(
            types.ClientRequest(types.InitializeRequest(params=params)), types.InitializeResult
        )
        await self.send_notification(types.ClientNotification(types.InitializedNotification()))
        return result


def url_only() -> types.ElicitationCapability:
    return types.ElicitationCapability(url=types.UrlElicitationCapability())


def first_revision() -> types.ElicitationCapability:
    """``elicitation: {}``: form mode, as the protocol's first revision declared it."""
    return types.ElicitationCapability()


Rewrite = Callable[[bytes], bytes]


def unchanged(data: bytes) -> bytes:
    return data


class Rewriting(httpx.AsyncBaseTransport):
    """httpx's transport sending each request body through ``rewrite``: bytes no client
    library sends (every one writes valid UTF-8) reach the edge as a client could send
    them."""

    def __init__(self, rewrite: Rewrite) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._rewrite = rewrite

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        content = self._rewrite(await request.aread())
        headers = [(k, v) for k, v in request.headers.multi_items() if k != "content-length"]
        sent = httpx.Request(
            request.method,
            request.url,
            headers=headers,
            content=content,
            extensions=request.extensions,
        )
        return await self._inner.handle_async_request(sent)

    async def aclose(self) -> None:
        await self._inner.aclose()


Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


@contextlib.asynccontextmanager
async def stdio_pipes(
    edge: McpEdge, token: str, rewrite: Rewrite = unchanged
) -> AsyncIterator[Streams]:
    """The client's (read, write) streams to ``edge.serve_stdio(token, ...)``, the stdio
    transport ``scheduling mcp`` serves, over two OS pipes (its stdin and stdout), one
    JSON-RPC message a line, each sent through ``rewrite``. Leaving closes the server's
    stdin, which ends its session."""
    loop = asyncio.get_running_loop()
    down_r, down_w = os.pipe()  # client -> server: the server's stdin
    up_r, up_w = os.pipe()  # server -> client: the server's stdout
    server_in, server_out = os.fdopen(down_r, "rb", buffering=0), os.fdopen(up_w, "wb")
    lines = asyncio.StreamReader(limit=4 * 1024 * 1024)
    reading, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(lines), os.fdopen(up_r, "rb", buffering=0)
    )
    writing, flow = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(down_w, "wb", buffering=0)
    )
    sink = asyncio.StreamWriter(writing, flow, None, loop)
    served = asyncio.create_task(edge.serve_stdio(token, server_in, server_out))
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def inbound() -> None:
        async with read_in:
            while line := await lines.readline():
                message = types.JSONRPCMessage.model_validate_json(line)
                await read_in.send(SessionMessage(message))

    async def outbound() -> None:
        async with write_out:
            async for message in write_out:
                line = message.message.model_dump_json(by_alias=True, exclude_none=True)
                sink.write(rewrite(line.encode()) + b"\n")
                await sink.drain()

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(inbound)
            tasks.start_soon(outbound)
            try:
                yield read_out, write_in
            finally:
                tasks.cancel_scope.cancel()
    finally:
        sink.close()  # the server's stdin ends: so does its session
        try:
            await asyncio.wait_for(served, 30)
        finally:
            reading.close()
            server_out.close()
            server_in.close()


_SCHEDULES = (
    "SELECT s.*, r.definition->>'title' AS title FROM schedules s"
    " JOIN schedule_revisions r ON r.schedule_id = s.id AND r.revision = s.current_revision"
)


@dataclass
class McpWorld:
    admin: PostgresUnitOfWorkFactory
    role: McpRole
    clock: VirtualClock
    tokens: Path
    url: str
    bearer: dict[Principal, str]

    @classmethod
    @contextlib.asynccontextmanager
    async def serving(
        cls,
        url: str,
        *,
        principals: Iterable[Principal] = PRINCIPALS,
        edge_type: type[McpEdge] = McpEdge,
        approval_timeout_seconds: float = 30.0,
    ) -> AsyncIterator[McpWorld]:
        who = list(principals)
        admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=2)
        try:
            await seed_durable(admin, who, at=START)
            clock = VirtualClock(START)
            with tempfile.TemporaryDirectory(prefix="mcp-world-") as tmp:
                path = Path(tmp) / "tokens.json"
                bearer = {p: issue(path, p) for p in who}
                role = build_mcp(
                    Settings.from_env(tool_env(url)),
                    clock=clock,
                    ids=SeededIds(0),
                    tokens=token_file(path),
                    default_agent_id=AGENT_ID,
                    approval_timeout_seconds=approval_timeout_seconds,
                    edge=edge_type(approval_timeout_seconds=approval_timeout_seconds),
                )
                try:
                    async with serving(role.edge) as endpoint:
                        yield cls(admin, role, clock, path, endpoint, bearer)
                finally:
                    await role.close()
        finally:
            await admin.dispose()

    @contextlib.asynccontextmanager
    async def session(
        self,
        who: Principal | str,
        elicitations: Elicitations | None = None,
        *,
        rewrite: Rewrite | None = None,
        declare: types.ElicitationCapability | None = None,
    ) -> AsyncIterator[ClientSession]:
        """The SDK's client as ``who`` (or with the raw token ``who``) over streamable
        HTTP; without ``elicitations`` the client declares no elicitation capability;
        ``rewrite`` changes each request body on the wire (``Rewriting``); ``declare``
        makes it declare exactly that capability (``DeclaringSession``)."""
        token = who if isinstance(who, str) else self.bearer[who]
        headers = {"Authorization": f"Bearer {token}"}
        transport = None if rewrite is None else Rewriting(rewrite)
        options: dict[str, Any] = {
            "read_timeout_seconds": timedelta(seconds=60),
            "elicitation_callback": elicitations,
        }
        async with (
            httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(30, read=300), transport=transport
            ) as http,
            streamable_http_client(self.url, http_client=http) as (read, write, _),
            (
                ClientSession(read, write, **options)
                if declare is None
                else DeclaringSession(read, write, elicitation=declare, **options)
            ) as session,
        ):
            await session.initialize()
            yield session

    def declaring(
        self, who: Principal, elicitation: types.ElicitationCapability, elicitations: Elicitations
    ) -> contextlib.AbstractAsyncContextManager[ClientSession]:
        """The SDK's client as ``who`` over streamable HTTP, declaring exactly
        ``elicitation`` and answering with ``elicitations``."""
        return self.session(who, elicitations, declare=elicitation)

    @contextlib.asynccontextmanager
    async def stdio(
        self,
        who: Principal,
        elicitations: Elicitations | None = None,
        *,
        rewrite: Rewrite = unchanged,
    ) -> AsyncIterator[ClientSession]:
        """The SDK's client over stdio (``stdio_pipes``): ``who``'s token is given once,
        when the edge starts serving, as ``scheduling mcp`` gives it; ``rewrite``
        changes each line on the wire."""
        async with (
            stdio_pipes(self.role.edge, self.bearer[who], rewrite) as (read, write),
            ClientSession(
                read,
                write,
                read_timeout_seconds=timedelta(seconds=60),
                elicitation_callback=elicitations,
            ) as session,
        ):
            await session.initialize()
            yield session

    def revoke(self, who: Principal) -> None:
        """``scheduling tokens revoke`` of ``who``'s token."""
        (entry,) = [
            e
            for e in read_entries(self.tokens)
            if (e.tenant_id, e.principal_id) == (who.tenant_id, who.principal_id)
        ]
        revoke_token(self.tokens, entry.token_id)

    async def post(self, body: Any, token: str | None, scheme: str = "Bearer") -> httpx.Response:
        """One raw POST to the endpoint (no SDK: to see what an unknown token gets)."""
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"{scheme} {token}".strip()
        async with httpx.AsyncClient(timeout=30) as client:
            return await client.post(self.url, json=body, headers=headers)

    def later(self, **delta: float) -> str:
        return (self.clock.now() + timedelta(**delta)).isoformat()

    async def sql(self, statement: str, **params: Any) -> list[Row]:
        async with self.admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []

    async def set_enabled(self, who: Principal, enabled: bool) -> None:
        await self.sql(
            "UPDATE principals SET enabled = :e WHERE tenant_id = :t AND principal_id = :p",
            e=enabled,
            t=who.tenant_id,
            p=who.principal_id,
        )

    async def set_scopes(self, who: Principal, scopes: Iterable[str]) -> None:
        await self.sql(
            "UPDATE principals SET scopes = :s WHERE tenant_id = :t AND principal_id = :p",
            s=sorted(scopes),
            t=who.tenant_id,
            p=who.principal_id,
        )

    async def schedules(self) -> list[Row]:
        """Every schedule row with its current revision's ``title``."""
        return await self.sql(_SCHEDULES + " ORDER BY s.id")

    async def schedule(self, schedule_id: str | UUID) -> Row | None:
        rows = await self.sql(_SCHEDULES + " WHERE s.id = :i", i=UUID(str(schedule_id)))
        return rows[0] if rows else None

    async def snapshot(self, tables: Iterable[str] = TOOL_TABLES) -> dict[str, list[str]]:
        """Every row of every table a tool call may write (as sorted reprs)."""
        return {
            table: sorted(repr(sorted(r.items())) for r in await self.sql(f"SELECT * FROM {table}"))
            for table in tables
        }


def compact_problems(result: types.CallToolResult, label: str) -> list[str]:
    """A success's text must be the output in the bytes the pipeline measured."""
    if result.isError:
        return []
    size, measured = text_bytes(result), output_bytes(payload(result))
    if size != measured:
        return [f"{label}: the model reads {size} bytes, the pipeline measured {measured}"]
    return []


# ------------------------------------------------------------------ the checks
# Each returns (problems, evidence); the gate facet asserts no problems, the tests of
# the tests assert a wrong edge yields some. Codes are the spec's, written out here.

SCHEDULE_TOOLS = sorted(
    [
        "schedule.cancel",
        "schedule.create",
        "schedule.list",
        "schedule.pause",
        "schedule.resume",
        "schedule.update",
    ]
)
DENIED = "schedule.tool.approval_denied"
# The schedule state (the invocation ledger records every call, refused ones included).
STATE_TABLES = tuple(t for t in TOOL_TABLES if not t.startswith("tool_"))
# Every table a tool call may write, the schedule's outbox events included.
DURABLE_TABLES = (*TOOL_TABLES, "schedule_outbox")
# What an undecided approval leaves alone: it opens the invocation and its request only.
UNDECIDED_TABLES = (*STATE_TABLES, "schedule_outbox", "tool_approval_decisions")
UNAUTHENTICATED = "schedule.mcp.unauthenticated"
UNSUPPORTED = "schedule.mcp.elicitation_unsupported"
UNANSWERED = "schedule.tool.approval_timeout"
# The spec: create's EXTERNAL_WRITE needs approval, and so does every lifecycle mutation.
APPROVAL_TOOLS = (
    "schedule.create",
    "schedule.update",
    "schedule.pause",
    "schedule.resume",
    "schedule.cancel",
)


Opens = Callable[[Elicitations], contextlib.AbstractAsyncContextManager[ClientSession]]


def changed(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    return [t for t in after if after[t] != before.get(t)]


async def approve(params: types.ElicitRequestParams) -> Reply:
    return accept(True)


async def error_answer(params: types.ElicitRequestParams) -> Reply:
    """The client answers the elicitation with a JSON-RPC error: no answer."""
    return types.ErrorData(code=types.INTERNAL_ERROR, message="no answer")


def reminder(world: McpWorld, title: str, key: str) -> dict[str, Any]:
    return {
        "title": title,
        "instruction": f"Remind me: {title}.",
        "at": world.later(days=1),
        "idempotency_key": key,
    }


# The spec's classification of each tool ("Model-callable creation" and "lifecycle"):
# its side effect, and so what an MCP client is told about it.
SIDE_EFFECTS = {
    "schedule.create": "external_write",
    "schedule.list": "none",
    "schedule.update": "external_write",
    "schedule.pause": "external_write",
    "schedule.resume": "external_write",
    "schedule.cancel": "external_delete",
}


def advertisement_problems(tools: list[types.Tool]) -> list[str]:
    """What tools/list tells a client must follow the spec's classification: only the
    read-only tool is read-only and needs no idempotency key, only the deleting one is
    destructive, every other takes a required ``idempotency_key``."""
    problems = []
    for tool in tools:
        effect = SIDE_EFFECTS.get(tool.name)
        notes = tool.annotations
        if effect is None or notes is None:
            problems.append(f"{tool.name}: unclassified or unannotated")
            continue
        if notes.readOnlyHint is not (effect == "none"):
            problems.append(f"{tool.name}: readOnlyHint {notes.readOnlyHint} for {effect}")
        if notes.destructiveHint is not (effect == "external_delete"):
            problems.append(f"{tool.name}: destructiveHint {notes.destructiveHint} for {effect}")
        required = "idempotency_key" in tool.inputSchema.get("required", [])
        if required is (effect == "none"):
            problems.append(f"{tool.name}: idempotency_key required={required} for {effect}")
    return problems


async def mcp_create_check(world: McpWorld) -> tuple[list[str], dict[str, Any]]:
    """List (exactly the roster); create approved (no row before the answer);
    declined, cancelled, accepted with false, with a truthy non-boolean or an empty
    form (no row, ever); a client that cannot elicit (fails closed)."""
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    asks = Elicitations()

    def before_answer(title: str, then: types.ElicitResult) -> Answer:
        async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
            rows = [r for r in await world.schedules() if r["title"] == title]
            if rows:
                problems.append(f"{title!r}: a schedule exists before the approval answer")
            return then

        return answer

    async with world.session(OWNER, asks) as session:
        listed = sorted(t.name for t in (await session.list_tools()).tools)
        evidence["listed"] = listed
        if listed != SCHEDULE_TOOLS:
            problems.append(f"listed tools {listed}, expected {SCHEDULE_TOOLS}")
        asks.then(before_answer("Stretch", accept(True)))
        made = await session.call_tool("schedule.create", reminder(world, "Stretch", "c-1"))
        problems += compact_problems(made, "create")
        if made.isError:
            problems.append(f"approved create failed: {payload(made)}")
        else:
            row = await world.schedule(payload(made)["schedule_id"])
            if row is None or row["state"] != "ACTIVE" or row["title"] != "Stretch":
                problems.append(f"approved create persisted {row}")
        if not asks.seen or asks.seen[0].get("view", {}).get("title") != "Stretch":
            problems.append(f"the elicitation did not show the approval view: {asks.seen}")
        # Only ``approve`` exactly true approves: a truthy non-boolean, a missing
        # answer or an empty form is no approval.
        refusals = {
            "declined": types.ElicitResult(action="decline"),
            "cancelled": types.ElicitResult(action="cancel"),
            "accepted-false": accept(False),
            "accepted-yes": types.ElicitResult(action="accept", content={"approve": "yes"}),
            "accepted-1": types.ElicitResult(action="accept", content={"approve": 1}),
            "accepted-empty": types.ElicitResult(action="accept", content={}),
        }
        for n, (label, answer) in enumerate(refusals.items()):
            title = f"Refused {label}"
            asks.then(before_answer(title, answer))
            refused = await session.call_tool("schedule.create", reminder(world, title, f"r-{n}"))
            rows = [r for r in await world.schedules() if r["title"] == title]
            if code(refused) != DENIED or rows:
                problems.append(f"{label}: {code(refused)}, {len(rows)} schedule(s) persisted")
        evidence["elicited"] = len(asks.seen)
        if len(asks.seen) != 1 + len(refusals):
            problems.append(f"{len(asks.seen)} elicitations for {1 + len(refusals)} calls")
        problems += await unanswered_problems(world, session, asks)
    before = await world.snapshot()
    async with world.session(OWNER) as mute:  # declares no elicitation capability
        blind = await mute.call_tool("schedule.create", reminder(world, "Blind", "b-1"))
    if code(blind) != "schedule.mcp.elicitation_unsupported" or await world.snapshot() != before:
        problems.append(f"a client that cannot elicit: {payload(blind)} (or state changed)")
    evidence["schedules"] = len(await world.schedules())
    return problems, evidence


async def mcp_authorization_check(world: McpWorld) -> tuple[list[str], dict[str, Any]]:
    """Pause approved (still ACTIVE at the question); another tenant's pause is not
    found and changes nothing; a missing scope is denied before any elicitation; an
    unknown token or none, the owner's token under another scheme than Bearer, and a
    disabled principal's token get no session, though it worked before; a scope revoked
    between two calls of one session is refused at the next; a numeric idempotency key
    is refused."""
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    owner_asks = Elicitations(default=accept(True))
    async with world.session(OWNER, owner_asks) as session:
        made = await session.call_tool("schedule.create", reminder(world, "Water", "a-1"))
    if made.isError:
        return [f"setup create failed: {payload(made)}"], evidence
    target = payload(made)["schedule_id"]
    pause = {"schedule_id": target, "expected_revision": 1}

    foreign_asks = Elicitations(default=accept(True))  # a wrong edge would act
    before = await world.snapshot(STATE_TABLES)
    async with world.session(FOREIGN, foreign_asks) as session:
        foreign = await session.call_tool("schedule.pause", {**pause, "idempotency_key": "f-1"})
        seen = await session.call_tool("schedule.list", {})
    row = await world.schedule(target)
    if code(foreign) != "schedule.not_found" or row is None or row["state"] != "ACTIVE":
        problems.append(
            f"cross-tenant pause: {payload(foreign)}; schedule now {row and row['state']}"
        )
    listed = [] if seen.isError else list(payload(seen).get("items", []))
    if any(str(item.get("schedule_id")) == target for item in listed):
        problems.append("another tenant's list shows the schedule")
    if (after := await world.snapshot(STATE_TABLES)) != before:
        problems.append(f"cross-tenant calls changed {[t for t in after if after[t] != before[t]]}")

    reader_asks = Elicitations(default=accept(True))
    before = await world.snapshot()
    async with world.session(READER, reader_asks) as session:
        denied = [
            await session.call_tool("schedule.create", reminder(world, "Nope", "d-1")),
            await session.call_tool("schedule.pause", {**pause, "idempotency_key": "d-2"}),
        ]
        after = await world.snapshot()
        read = await session.call_tool("schedule.list", {})
    codes = [code(r) for r in denied]
    if codes != ["schedule.auth.scope_required"] * 2 or reader_asks.seen:
        problems.append(f"missing scope: {codes}, {len(reader_asks.seen)} elicitation(s)")
    if read.isError:
        problems.append(f"schedule.read may list: {payload(read)}")
    if after != before:
        problems.append(f"denied calls changed {[t for t in after if after[t] != before[t]]}")

    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    attempts: list[tuple[str, str | None, str]] = [
        ("unknown token", "sch_0000000000000000_unknown", "Bearer"),
        ("no token", None, "Bearer"),
        # The owner's own token, but not as a Bearer credential.
        ("basic scheme", world.bearer[OWNER], "Basic"),
        ("no scheme", world.bearer[OWNER], ""),
    ]
    if DISABLED in world.bearer:
        # Authority is read per request, never remembered from an earlier one: a token
        # that has just worked loses schedule.write between two calls of one session
        # (the create is refused before any question, nothing written), then its
        # principal is disabled (below: the token gets nothing more).
        revoke_asks = Elicitations(default=accept(True))
        async with world.session(DISABLED, revoke_asks) as session:
            first = await session.call_tool("schedule.list", {})
            await world.set_scopes(DISABLED, DISABLED.scopes - {"schedule.write"})
            before = await world.snapshot()
            revoked = await session.call_tool("schedule.create", reminder(world, "Late", "r-1"))
            after = await world.snapshot()
        if first.isError:
            problems.append(f"a principal holding every scope may list: {payload(first)}")
        if code(revoked) != "schedule.auth.scope_required" or revoke_asks.seen:
            problems.append(f"scope revoked within a session: {payload(revoked)}")
        if after != before:
            changed = [t for t in after if after[t] != before[t]]
            problems.append(f"a revoked scope changed {changed}")
        # A valid token of a principal disabled since it was issued (and since it called).
        await world.set_enabled(DISABLED, False)
        attempts.append(("disabled principal", world.bearer[DISABLED], "Bearer"))
    for label, token, scheme in attempts:
        response = await world.post(ping, token, scheme)
        body = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        got = body.get("error", {}).get("code") if isinstance(body.get("error"), dict) else None
        if response.status_code != 401 or got != "schedule.mcp.unauthenticated":
            problems.append(f"{label}: HTTP {response.status_code} {got}")
    # Every request of the endpoint is authenticated before the protocol, not only a
    # POST: the event stream (GET) and the session's end (DELETE) too.
    for method in ("GET", "DELETE"):
        for label, token in (("no token", None), ("unknown token", "sch_0000000000000000_x")):
            headers = {"Accept": "application/json, text/event-stream"}
            if token is not None:
                headers["Authorization"] = f"Bearer {token}"
            async with httpx.AsyncClient(timeout=30) as client:
                response = await client.request(method, world.url, headers=headers)
            if response.status_code != 401:
                problems.append(f"{method} with {label}: HTTP {response.status_code}")
    try:
        async with world.session("sch_0000000000000000_unknown") as session:
            problems.append("an unknown token initialized a session")
    except Exception:  # the SDK client meets the 401 at initialize
        evidence["unknown_token_session"] = "refused"

    # An idempotency key that is not a string is refused, not coerced: 7 and "7" would
    # otherwise name one invocation.
    odd_asks = Elicitations(default=accept(True))
    before = await world.snapshot()
    async with world.session(OWNER, odd_asks) as session:
        odd = await session.call_tool("schedule.pause", {**pause, "idempotency_key": 7})
    if code(odd) != "schedule.tool.invalid_arguments" or odd_asks.seen:
        problems.append(f"a numeric idempotency key: {payload(odd)}")
    # A tool with an effect takes a key on every call: none, or an empty one, is refused
    # (else every keyless call of the principal would share one key and replay the
    # first), before anyone is asked and with nothing written.
    keyless = {
        k: v for k, v in reminder(world, "Keyless", "unused").items() if k != "idempotency_key"
    }
    for label, arguments in (
        ("no key", keyless),
        ("an empty key", {**keyless, "idempotency_key": ""}),
    ):
        asks = Elicitations(default=accept(True))
        before = await world.snapshot()
        async with world.session(OWNER, asks) as session:
            refused = await session.call_tool("schedule.create", arguments)
        refusals = (
            "schedule.tool.invalid_arguments",
            "schedule.validation.invalid_idempotency_key",
        )
        if code(refused) not in refusals or asks.seen:
            problems.append(f"a create with {label}: {payload(refused)}")
        if (after := await world.snapshot()) != before:
            problems.append(
                f"a create with {label} changed {[t for t in after if after[t] != before[t]]}"
            )
    if (after := await world.snapshot()) != before:
        problems.append(f"a numeric key changed {[t for t in after if after[t] != before[t]]}")

    pause_asks = Elicitations()
    state_at_question: list[str] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        now = await world.schedule(target)
        state_at_question.append(str(now and now["state"]))
        return accept(True)

    pause_asks.then(answer)
    async with world.session(OWNER, pause_asks) as session:
        paused = await session.call_tool("schedule.pause", {**pause, "idempotency_key": "p-1"})
    problems += compact_problems(paused, "pause")
    row = await world.schedule(target)
    if paused.isError or row is None or row["state"] != "PAUSED":
        problems.append(f"approved pause: {payload(paused)}; schedule {row and row['state']}")
    if state_at_question != ["ACTIVE"]:
        problems.append(f"state while the approval was asked: {state_at_question}")
    evidence["pause_question_state"] = state_at_question
    return problems, evidence


async def unanswered_problems(
    world: McpWorld, session: ClientSession, asks: Elicitations
) -> list[str]:
    """An elicitation that ends without an answer (here the client's error answer; a
    timeout or a closed connection alike) decides nothing (ADRs 2112, 2121): the
    retryable approval_timeout, no decision, no schedule, no event; the same key then
    asks again, and that approval executes."""
    problems: list[str] = []
    arguments = reminder(world, "Unanswered", "u-1")
    asks.then(error_answer)
    before, asked = await world.snapshot(UNDECIDED_TABLES), len(asks.seen)
    first = await session.call_tool("schedule.create", arguments)
    after = await world.snapshot(UNDECIDED_TABLES)
    error = payload(first).get("error")
    retryable = isinstance(error, dict) and error.get("retryable") is True
    if code(first) != UNANSWERED or not retryable:
        problems.append(f"an unanswered elicitation: {payload(first)}")
    if len(asks.seen) != asked + 1:
        problems.append(f"an unanswered create asked {len(asks.seen) - asked} time(s)")
    if after != before:
        problems.append(f"an unanswered elicitation changed {changed(before, after)}")
    asks.then(approve)
    again = await session.call_tool("schedule.create", arguments)
    rows = [r for r in await world.schedules() if r["title"] == "Unanswered"]
    if again.isError or len(rows) != 1:
        problems.append(f"the approved retry: {payload(again)}, {len(rows)} schedule(s)")
    if len(asks.seen) != asked + 2:
        problems.append("the retry with the same key was not asked again")
    return problems


async def mcp_stdio_check(world: McpWorld) -> tuple[list[str], dict[str, Any]]:
    """stdio has no header per request: the token is given once, when serving starts,
    and resolved again on every call (ADR 2110). On one stdio connection: an approved
    create, then the token revoked in the file: the next calls are refused
    (unauthenticated), nothing asked or written. On another: a scope removed from the
    directory refuses the next create before any question (scope_required), and the
    principal disabled refuses the next call (unauthenticated)."""
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    asks = Elicitations(default=accept(True))
    async with world.stdio(OWNER, asks) as session:
        made = await session.call_tool("schedule.create", reminder(world, "Piped", "s-1"))
        world.revoke(OWNER)
        before, asked = await world.snapshot(DURABLE_TABLES), len(asks.seen)
        late = [
            await session.call_tool("schedule.list", {}),
            await session.call_tool("schedule.create", reminder(world, "Piped late", "s-2")),
        ]
        after = await world.snapshot(DURABLE_TABLES)
    if made.isError:
        problems.append(f"stdio: an approved create failed: {payload(made)}")
    codes = [code(r) for r in late]
    evidence["revoked_token"] = codes
    if codes != [UNAUTHENTICATED] * 2:
        problems.append(f"stdio: the token revoked in the file got {codes}")
    if len(asks.seen) != asked:
        problems.append("stdio: a call with a revoked token was asked for approval")
    if after != before:
        problems.append(f"stdio: calls with a revoked token changed {changed(before, after)}")

    asks = Elicitations(default=accept(True))
    async with world.stdio(DISABLED, asks) as session:
        first = await session.call_tool("schedule.list", {})
        await world.set_scopes(DISABLED, DISABLED.scopes - {"schedule.write"})
        before = await world.snapshot(DURABLE_TABLES)
        descoped = await session.call_tool("schedule.create", reminder(world, "Piped 2", "s-3"))
        await world.set_enabled(DISABLED, False)
        disabled = await session.call_tool("schedule.list", {})
        after = await world.snapshot(DURABLE_TABLES)
    if first.isError:
        problems.append(f"stdio: a principal holding every scope may list: {payload(first)}")
    evidence["revoked_scope"] = code(descoped)
    if code(descoped) != "schedule.auth.scope_required" or asks.seen:
        problems.append(f"stdio: a scope revoked within the connection: {payload(descoped)}")
    evidence["disabled_principal"] = code(disabled)
    if code(disabled) != UNAUTHENTICATED:
        problems.append(f"stdio: a principal disabled within the connection: {payload(disabled)}")
    if after != before:
        problems.append(f"stdio: revoked authority changed {changed(before, after)}")
    return problems, evidence


async def mcp_elicitation_capability_check(
    world: McpWorld,
) -> tuple[list[str], dict[str, Any]]:
    """Every tool that needs approval (create, update, pause, resume, cancel), called by
    a client that declared no elicitation or only URL mode, is refused with
    elicitation_unsupported before the pipeline (ADR 2112): nothing asked, nothing
    written (ledger, approvals, schedules, revisions, events); such a client may still
    list. A client that declared the first revision's empty object elicits in form
    mode: it is asked, and its approved pause acts."""
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    async with world.session(OWNER, Elicitations(default=accept(True))) as session:
        made = [
            await session.call_tool("schedule.create", reminder(world, title, f"setup-{title}"))
            for title in ("Active", "Held")
        ]
        if any(r.isError for r in made):
            return [f"setup creates failed: {[payload(r) for r in made]}"], evidence
        active, held = (str(payload(r)["schedule_id"]) for r in made)
        hold = {"schedule_id": held, "expected_revision": 1, "idempotency_key": "setup-hold"}
        paused = await session.call_tool("schedule.pause", hold)
    row = await world.schedule(held)
    if paused.isError or row is None or row["state"] != "PAUSED":
        return [f"setup pause failed: {payload(paused)}"], evidence
    ref = {"schedule_id": active, "expected_revision": 1}
    calls: dict[str, dict[str, Any]] = {
        "schedule.create": reminder(world, "Blind", "unused"),
        "schedule.update": {**ref, "title": "Renamed blind"},
        "schedule.pause": ref,
        "schedule.resume": {"schedule_id": held, "expected_revision": row["current_revision"]},
        "schedule.cancel": ref,
    }
    clients: dict[str, Opens] = {
        # No callback: the SDK's client declares no elicitation capability.
        "no-elicitation": lambda asks: world.session(OWNER),
        "url-only": lambda asks: world.declaring(OWNER, url_only(), asks),
    }
    for label, opens in clients.items():
        asks = Elicitations(default=accept(True))  # would approve, were it asked
        got: dict[str, str | None] = {}
        async with opens(asks) as session:
            before = await world.snapshot(DURABLE_TABLES)
            for n, tool in enumerate(APPROVAL_TOOLS):
                keyed = {**calls[tool], "idempotency_key": f"blind-{n}-{label}"}
                got[tool] = code(await session.call_tool(tool, keyed))
            after = await world.snapshot(DURABLE_TABLES)
            listed = await session.call_tool("schedule.list", {})  # the ledger records it
        evidence[label] = got
        wrong = {tool: c for tool, c in got.items() if c != UNSUPPORTED}
        if wrong:
            problems.append(f"{label}: tools needing approval answered {wrong}")
        if asks.seen:
            problems.append(f"{label}: {len(asks.seen)} elicitation(s) sent to it")
        if after != before:
            problems.append(f"{label}: tools needing approval changed {changed(before, after)}")
        if listed.isError:
            problems.append(f"{label}: may list, got {payload(listed)}")

    asks = Elicitations(default=accept(True))
    async with world.declaring(OWNER, first_revision(), asks) as session:
        done = await session.call_tool("schedule.pause", {**ref, "idempotency_key": "first"})
    row = await world.schedule(active)
    if done.isError or row is None or row["state"] != "PAUSED" or len(asks.seen) != 1:
        problems.append(
            f"elicitation {{}} (form mode): {payload(done)}, {len(asks.seen)} question(s),"
            f" schedule {row and row['state']}"
        )
    return problems, evidence


# Replaced on the wire by the byte 0xff, which is never UTF-8 (no client library sends it).
INVALID_BYTE = "zz-invalid-byte-zz"
TEXT_INVALID = "schedule.text.invalid"


def invalid_byte(data: bytes) -> bytes:
    return data.replace(INVALID_BYTE.encode(), b"\xff")


async def mcp_text_check(world: McpWorld) -> tuple[list[str], dict[str, Any]]:
    """Over stdio and over streamable HTTP, a byte that is not UTF-8 in a create's
    title or in its call key, and a NUL in its call key, are ``schedule.text.invalid``
    (ADR 2112: never silently replaced by U+FFFD and stored): nothing asked, nothing
    written."""
    problems: list[str] = []
    evidence: dict[str, Any] = {}
    Client = Callable[[Elicitations], contextlib.AbstractAsyncContextManager[ClientSession]]
    clients: dict[str, Client] = {
        "stdio": lambda asks: world.stdio(OWNER, asks, rewrite=invalid_byte),
        "http": lambda asks: world.session(OWNER, asks, rewrite=invalid_byte),
    }
    for label, opens in clients.items():
        calls = {
            "title byte": reminder(world, f"Bad {INVALID_BYTE} title", f"{label}-t"),
            "key byte": reminder(world, f"Clean {label}", f"{label}-{INVALID_BYTE}"),
            "key nul": reminder(world, f"Clean {label}", f"{label}-\x00"),
        }
        asks = Elicitations(default=accept(True))  # a wrong edge would act
        before = await world.snapshot(DURABLE_TABLES)
        async with opens(asks) as session:
            got = {
                name: code(await session.call_tool("schedule.create", arguments))
                for name, arguments in calls.items()
            }
        after = await world.snapshot(DURABLE_TABLES)
        evidence[label] = got
        wrong = {name: c for name, c in got.items() if c != TEXT_INVALID}
        if wrong:
            problems.append(f"{label}: bad text answered {wrong}")
        if asks.seen:
            problems.append(f"{label}: bad text was asked for approval {len(asks.seen)} time(s)")
        if after != before:
            problems.append(f"{label}: bad text changed {changed(before, after)}")
    return problems, evidence
