"""A conversation world on PostgreSQL for the model-tool gate checks (not a test module).

``ToolWorld.open(url)`` seeds principals and the default agent through an admin login,
then builds the tool pipeline through the composition root (``bootstrap.build_tools``,
development environment, both schedule flags on, PostgreSQL storage, durable
directories, the API role by ``SET LOCAL ROLE``) on a virtual clock, with scripted
approvals. ``conversation()`` is a chat session whose model turns go through that
pipeline. ``snapshot()`` reads every row a tool call could write, so a check can say
"nothing changed" by comparing two snapshots.

Checks may substitute a plausible wrong implementation (a pipeline subclass, a tool
handler) through ``pipeline_class`` and ``ToolWorld.replace_handler``: that is how
the tests of the tests show each gate able to fail.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import text

from scheduling.adapters.memory.directories import ConfiguredBrowserProfiles
from scheduling.adapters.memory.tool_ledger import ConfiguredWebsiteBindings
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.bootstrap import ToolsRole, build_scheduler, build_tools
from scheduling.config import Settings
from scheduling.domain.identity import Principal
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
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import (
    AGENT_ID,
    START,
    WORLD_ENV,
    principal,
    scheduler_settings,
    seed_durable,
)

WHO = principal("conversation-owner")
OTHER = principal("someone-else")
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
        "SCHEDULING_ROLE_PREFIX": role_names().owner.removesuffix("_owner"),
    }


class InspectingApprovals(ScriptedApprovals):
    """Scripted approvals that run ``on_request`` (e.g. read the database) before deciding.

    The approver takes ``think_seconds`` of virtual time per decision, so successive
    effects carry strictly increasing timestamps (events order by time)."""

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

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if self.on_request is not None:
            await self.on_request(request)
        self.clock.advance(self.think_seconds)
        return await super().decide(request)


@dataclass
class ToolWorld:
    admin: PostgresUnitOfWorkFactory
    role: ToolsRole
    clock: VirtualClock
    ids: SeededIds
    approvals: InspectingApprovals
    websites: ConfiguredWebsiteBindings
    profiles: ConfiguredBrowserProfiles
    pipeline: ToolPipeline
    conversations: list[Conversation] = field(default_factory=list)

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        seed: int = 0,
        start: datetime = START,
        principals: Iterable[Principal] = (WHO, OTHER),
        pipeline_class: type[ToolPipeline] = ToolPipeline,
        approval_port: ApprovalPort | None = None,
    ) -> ToolWorld:
        """``approval_port`` replaces the scripted approvals (e.g. an edge's own port)."""
        admin = PostgresUnitOfWorkFactory.from_url(url, pool_size=5)
        await seed_durable(admin, list(principals), at=start)
        clock, ids = VirtualClock(start), SeededIds(seed)
        approvals = InspectingApprovals(clock)
        websites = ConfiguredWebsiteBindings()
        role = build_tools(
            Settings.from_env(tool_env(url)),
            clock=clock,
            ids=ids,
            approvals=approval_port or approvals,
            default_agent_id=AGENT_ID,
            website_bindings=websites,
            uow=PostgresUnitOfWorkFactory(admin.engine, assume_role=role_names().api),
        )
        assert role.api is not None
        profiles = role.api.profiles
        pipeline = pipeline_class(role.registry, role.pipeline.governance)
        return cls(admin, role, clock, ids, approvals, websites, profiles, pipeline)

    @property
    def service(self) -> ScheduleService:
        assert self.role.service is not None
        return self.role.service

    def replace_handler(self, name: str, make: Callable[[ToolHandler], ToolHandler]) -> None:
        """Swap every registered version of ``name`` for ``make(original handler)``."""
        for spec in self.role.registry.versions(name):
            tool = self.role.registry.get(name, spec.version)
            assert tool is not None
            assert tool.handler is not None
            self.role.registry.register(RegisteredTool(spec, handler=make(tool.handler)))

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
        scheduler = PostgresUnitOfWorkFactory(self.admin.engine, assume_role=role_names().scheduler)
        return build_scheduler(
            scheduler_settings(), clock=self.clock, ids=self.ids.fork("materializer"), uow=scheduler
        ).materializer

    def later(self, **delta: float) -> str:
        """An exact aware instant ``delta`` after the virtual now (RFC 3339, offset +00:00)."""
        return (self.clock.now() + timedelta(**delta)).isoformat()

    async def close(self) -> None:
        await self.role.close()
        await self.admin.dispose()
