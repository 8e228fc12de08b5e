"""A conversation world on PostgreSQL for the model-tool gate checks (not a test module).

``ToolWorld.open(url)`` seeds principals (two tenants, two principals each) and two
versions of the default agent (v1 active, v2 with another policy profile waiting to
be rotated in by ``activate``) through an admin login, then builds the tool pipeline
through the composition root (``bootstrap.build_tools``, development environment,
both schedule flags on, PostgreSQL storage, durable directories, the API role by
``SET LOCAL ROLE``) on a virtual clock, with scripted approvals. The world's pipeline
IS the one ``build_tools`` returned (never a rebuilt one). ``conversation()`` is a
chat session whose model turns go through it. ``snapshot()`` reads every row a tool
call could write, so a check can say "nothing changed" by comparing two snapshots.

Tests of the tests substitute a plausible wrong implementation through a pipeline
subclass (``pipeline_class``: the built pipeline object's class is swapped, its
registry and governance stay those of ``build_tools``), ``replace_handler`` (a tool's
registered handler) or the bootstrap's injected ports: that is how each gate is shown
able to fail.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import text

from scheduling.bootstrap import ToolsRole, build_scheduler, build_tools
from scheduling.config import Settings
from scheduling.domain.identity import Principal
from scheduling.domain.tenancy import TenantCeilings
from scheduling.runtime.tool_pipeline import (
    ApprovalDecision,
    ApprovalPort,
    ApprovalRequest,
    Conversation,
    ProposedCall,
    RegisteredTool,
    ScriptedApprovals,
    ToolHandler,
    ToolPipeline,
    ToolResult,
)
from scheduling.service.materializer import ScheduleMaterializer
from scheduling.service.schedules import ScheduleService
from scheduling.testing import (
    ConfiguredBrowserProfiles,
    ConfiguredWebsiteBindings,
    PostgresStorage,
    PostgresUnitOfWorkFactory,
    StaticAgentRegistry,
    StaticPrincipalDirectory,
    open_storage,
    role_names,
)
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    AGENT_VERSION_2,
    LIMITS,
    POLICY,
    POLICY_2,
    START,
    TENANT_B,
    WORLD_ENV,
    activate_agent_version,
    ceiling_env,
    principal,
    scheduler_settings,
    seed_agent_version,
    seed_durable,
)

WHO = principal("conversation-owner")
OTHER = principal("someone-else")
# The second tenant's two principals; WHO_B shares WHO's principal id on purpose, so
# only the tenant tells their rows (and their idempotency keys) apart.
WHO_B = principal(WHO.principal_id, tenant_id=TENANT_B)
OTHER_B = principal("someone-else-b", tenant_id=TENANT_B)
EVERYONE = (WHO, OTHER, WHO_B, OTHER_B)
FLAG_NAMES = ("AGENT_SCHEDULE_API_ENABLED", "AGENT_SCHEDULE_WORKER_ENABLED")
SESSION = UUID("7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6")
Row = dict[str, Any]

# Every table a governed tool call may write.
TOOL_TABLES = (
    "schedules",
    "schedule_revisions",
    "schedule_idempotency_keys",
    "schedule_occurrences",
    "process_events",
    "runs",
    "tool_invocations",
    "tool_approval_requests",
    "tool_approval_decisions",
)
_ORDER = {
    "schedules": "id",
    "schedule_revisions": "schedule_id, revision",
    "schedule_idempotency_keys": "tenant_id, principal_id, key",
    "schedule_occurrences": "id",
    "process_events": "occurred_at, id",
    "runs": "id",
    "tool_invocations": "id",
    "tool_approval_requests": "id",
    "tool_approval_decisions": "approval_id",
}


def tool_env(url: str, *, api: bool = True, worker: bool = True) -> dict[str, str]:
    """The world's development settings with the schedule flags as given, on PostgreSQL
    at ``url`` (the builders log in as the API role over it with ``SET LOCAL ROLE``)."""
    return {
        **WORLD_ENV,
        "AGENT_SCHEDULE_API_ENABLED": "1" if api else "0",
        "AGENT_SCHEDULE_WORKER_ENABLED": "1" if worker else "0",
        "AGENT_SCHEDULE_DATABASE_URL": url,
        "AGENT_SCHEDULE_ROLE_PREFIX": role_names().owner.removesuffix("_owner"),
    }


def unset_flags_env(url: str) -> dict[str, str]:
    """The world's settings with neither schedule flag present at all (the default)."""
    return {k: v for k, v in tool_env(url).items() if k not in FLAG_NAMES}


class ApproverTimedOut(TimeoutError):
    """The approval port gave up waiting for the person (raised by ``fail_next``)."""


class ApproverHung(BaseException):
    """A ``hang_next`` approver was still waiting after ``HANG_CAP_SECONDS`` of real
    time: the pipeline did not bound the wait (so the check ends instead of hanging; a
    BaseException, so no ``except Exception`` in the product turns it into an answer)."""


HANG_CAP_SECONDS = 5.0


class InspectingApprovals(ScriptedApprovals):
    """Scripted approvals that run ``on_request`` (e.g. read the database) before deciding.

    The approver takes ``think_seconds`` of virtual time per decision, so successive
    effects carry strictly increasing timestamps (events order by time). ``fail_next``
    makes the next decisions raise instead (an approver that timed out); ``hang_next``
    makes them never answer (only the pipeline's own approval timeout ends the wait;
    after ``HANG_CAP_SECONDS`` of real time the approver raises ``ApproverHung``)."""

    def __init__(
        self,
        clock: VirtualClock,
        verdicts: Iterable[bool] = (),
        *,
        default: bool = True,
        think_seconds: float = 1,
        on_request: Callable[[ApprovalRequest], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(verdicts, default=default)
        self.clock = clock
        self.think_seconds = think_seconds
        self.on_request = on_request
        self._failures: deque[BaseException] = deque()
        self._hangs = 0
        self.decided: list[tuple[ApprovalRequest, bool]] = []

    def drop_verdicts(self) -> None:
        """Forget the scripted verdicts not yet used (the default applies again)."""
        self._verdicts.clear()

    def fail_next(self, *errors: BaseException) -> None:
        self._failures.extend(errors)

    def hang_next(self, count: int = 1) -> None:
        self._hangs += count

    def drop_failures(self) -> None:
        """Forget the raises and hangs not yet used (a call that never asked)."""
        self._failures.clear()
        self._hangs = 0

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        # A scripted raise or hang is taken and the request recorded on entry: the
        # pipeline's bound may cancel this coroutine during ``on_request`` (a database
        # read), and the count of asks must not depend on how fast that read is.
        failure = self._failures.popleft() if self._failures else None
        hang = failure is None and self._hangs > 0
        if hang:
            self._hangs -= 1
        if failure is not None or hang:
            self.requests.append(request)
        if self.on_request is not None:
            await self.on_request(request)
        self.clock.advance(self.think_seconds)
        if failure is not None:
            raise failure
        if hang:
            await asyncio.sleep(HANG_CAP_SECONDS)
            raise ApproverHung("no approval timeout ended the wait")
        decision = await super().decide(request)
        self.decided.append((request, decision.approved))
        return decision


@dataclass
class ToolWorld:
    storage: PostgresStorage
    admin: PostgresUnitOfWorkFactory
    role: ToolsRole
    clock: VirtualClock
    ids: SeededIds
    approvals: InspectingApprovals
    websites: ConfiguredWebsiteBindings
    profiles: ConfiguredBrowserProfiles
    conversations: list[Conversation] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        seed: int = 0,
        start: datetime = START,
        principals: Iterable[Principal] = EVERYONE,
        pipeline_class: type[ToolPipeline] | None = None,
        approval_port: ApprovalPort | None = None,
        ceilings: TenantCeilings | None = None,
    ) -> ToolWorld:
        """``approval_port`` replaces the scripted approvals (e.g. an edge's own port);
        ``ceilings`` replaces the deployment's tenant ceilings (the world's by default);
        ``pipeline_class`` (a subclass of the built pipeline's class) is a wrong
        implementation for a test of the test, swapped onto the built object."""
        storage = open_storage(url, pool_size=5)
        admin = storage.factory("trusted")
        await seed_durable(admin, list(principals), at=start)
        await seed_agent_version(admin, AGENT_VERSION_2, POLICY_2, at=start)
        clock, ids = VirtualClock(start), SeededIds(seed)
        approvals = InspectingApprovals(clock)
        websites = ConfiguredWebsiteBindings()
        role = build_tools(
            Settings.from_env(
                {**tool_env(url), **(ceiling_env(ceilings) if ceilings is not None else {})}
            ),
            clock=clock,
            ids=ids,
            approvals=approval_port or approvals,
            default_agent_id=AGENT_ID,
            website_bindings=websites,
            storage=storage,
        )
        assert role.api is not None
        profiles = role.api.profiles
        if pipeline_class is not None:
            if not issubclass(pipeline_class, type(role.pipeline)):
                raise TypeError(f"{pipeline_class} does not extend {type(role.pipeline)}")
            role.pipeline.__class__ = pipeline_class
        return cls(storage, admin, role, clock, ids, approvals, websites, profiles)

    @property
    def pipeline(self) -> ToolPipeline:
        """The pipeline ``bootstrap.build_tools`` built (registry, ledger, approvals)."""
        return self.role.pipeline

    async def activate(self, version: str) -> None:
        """Rotate the default agent's active version (as a deploy would, at now)."""
        await activate_agent_version(self.admin, version, self.clock.now())

    @property
    def service(self) -> ScheduleService:
        assert self.role.service is not None
        return self.role.service

    def replace_handler(
        self, name: str, make: Callable[[ToolHandler], ToolHandler]
    ) -> Callable[[], None]:
        """Swap every registered version of ``name``'s handler for ``make(original
        handler)`` (its spec and normalizer kept); returns what puts the originals back."""
        originals: list[RegisteredTool] = []
        for spec in self.role.registry.versions(name):
            tool = self.role.registry.get(name, spec.version)
            assert tool is not None
            assert tool.handler is not None
            originals.append(tool)
            # The wrapper keeps the tool's normalizer: the ledger hashes the same
            # arguments as with the original, so a retry after restore() matches.
            self.role.registry.register(replace(tool, handler=make(tool.handler)))

        def restore() -> None:
            for tool in originals:
                self.role.registry.register(tool)

        return restore

    def conversation(self, who: Principal = WHO, session_id: UUID | None = SESSION) -> Conversation:
        chat = Conversation(self.pipeline, who, self.role.roster, session_id=session_id)
        self.conversations.append(chat)
        return chat

    async def call(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        key: str,
        *,
        who: Principal = WHO,
        version: str | None = None,
    ) -> ToolResult:
        """One model turn proposing one call (a fresh chat session of ``who``)."""
        return await self.conversation(who).propose(
            ProposedCall(tool, dict(arguments), key, version)
        )

    async def sql(self, statement: str, **params: Any) -> list[Row]:
        async with self.admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []

    async def snapshot(self) -> dict[str, list[Row]]:
        """Every row of every table a tool call may write."""
        return {
            table: await self.sql(f"SELECT * FROM {table} ORDER BY {_ORDER[table]}")
            for table in TOOL_TABLES
        }

    async def counts(self) -> dict[str, int]:
        return {table: len(rows) for table, rows in (await self.snapshot()).items()}

    async def schedule(self, schedule_id: UUID | str) -> Row:
        rows = await self.sql("SELECT * FROM schedules WHERE id = :i", i=UUID(str(schedule_id)))
        assert rows, f"no schedule {schedule_id}"
        return rows[0]

    async def revisions(self, schedule_id: UUID | str) -> list[Row]:
        return await self.sql(
            "SELECT * FROM schedule_revisions WHERE schedule_id = :i ORDER BY revision",
            i=UUID(str(schedule_id)),
        )

    async def events(self, schedule_id: UUID | str) -> list[str]:
        rows = await self.sql(
            "SELECT event_type FROM process_events WHERE schedule_id = :i ORDER BY occurred_at, id",
            i=UUID(str(schedule_id)),
        )
        return [str(r["event_type"]) for r in rows]

    def materializer(self) -> ScheduleMaterializer:
        """The real materializer through the least-privilege scheduler role
        (``bootstrap.build_scheduler``)."""
        return build_scheduler(
            scheduler_settings(),
            clock=self.clock,
            ids=self.ids.fork("materializer"),
            storage=self.storage,
        ).materializer

    async def unapproved_effects(self) -> list[Row]:
        """Every finished effectful invocation with no approving decision recorded on
        the ledger (an effect must follow an approval of the view it executed)."""
        return await self.sql(
            "SELECT i.id, i.tool_name, i.idempotency_key FROM tool_invocations i"
            " WHERE i.state = 'SUCCEEDED' AND i.idempotency_key IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM tool_approval_requests r"
            "   JOIN tool_approval_decisions d ON d.approval_id = r.id"
            "   WHERE r.invocation_id = i.id AND d.approved)"
        )

    def later(self, **delta: float) -> str:
        """An exact aware instant ``delta`` after the virtual now (RFC 3339, offset +00:00)."""
        return (self.clock.now() + timedelta(**delta)).isoformat()

    async def close(self) -> None:
        await self.role.close()
        await self.storage.close()


MEMORY_ENV = {
    **WORLD_ENV,
    "AGENT_SCHEDULE_STORAGE": "memory",
    "AGENT_SCHEDULE_PRINCIPAL_DIRECTORY": "static",
    "AGENT_SCHEDULE_ADMISSION": "allow_all",
}


def memory_tools(
    clock: VirtualClock, approvals: ApprovalPort, principals: Iterable[Principal] = EVERYONE
) -> ToolsRole:
    """``bootstrap.build_tools`` on in-memory storage (the development composition: the
    memory unit of work and tool ledger, static directories seeded here)."""
    role = build_tools(
        Settings.from_env(MEMORY_ENV),
        clock=clock,
        ids=SeededIds(1),
        approvals=approvals,
        default_agent_id=AGENT_ID,
    )
    assert role.api is not None
    directory, agents = role.api.principals, role.api.agents
    assert isinstance(directory, StaticPrincipalDirectory)
    assert isinstance(agents, StaticAgentRegistry)
    for who in principals:
        directory.set(who.tenant_id, who.principal_id, who.scopes)
    agents.add(AGENT_ID, AGENT_VERSION, POLICY, LIMITS)
    agents.activate(AGENT_ID, AGENT_VERSION)
    return role
