"""A real HTTP control plane for gate checks and tests (not a test module).

``http_world(pg_url, ...)`` seeds principals and the agent through the admin login,
issues one bearer token per principal into a temporary token file, builds the control
plane through ``bootstrap.build_control_plane`` (API role, durable directories, forced
row-level security) on a virtual clock, and serves ``scheduling.http.create_app`` with
uvicorn on an ephemeral loopback port in the test's event loop. Requests go through
``httpx`` over TCP. ``scheduler()`` and ``run_worker()`` build the real schedule and
run workers through the same composition root on the same clock.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from scheduling.bootstrap import (
    ControlPlane,
    RunWorkerRole,
    SchedulerRole,
    SchedulerSettings,
    build_control_plane,
    build_run_worker,
    build_scheduler,
)
from scheduling.config import CeilingSettings, Environment, Settings, Topology
from scheduling.domain.identity import Principal
from scheduling.http.app import create_app
from scheduling.http.serving import running
from scheduling.ports.runtime import RunPriority
from scheduling.testing import PostgresUnitOfWorkFactory, TokenFile, issue_token
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    ALL_SCOPES,
    CEILINGS,
    LIMITS,
    POLICY,
    START,
    principal,
    seed_durable,
)

# The owner also holds the run and session scopes the linked routes need.
OWNER = principal("http-owner", scopes=ALL_SCOPES | {"run.read", "run.cancel", "session.read"})
Row = dict[str, Any]


def settings_for(url: str) -> Settings:
    """Development settings with scheduling on over PostgreSQL and the durable directory."""
    return Settings(
        environment=Environment.DEVELOPMENT,
        api_flag="1",
        worker_flag="1",
        storage="postgres",
        principal_directory="durable",
        admission="postgres",
        database_url=url,
        ceilings=CeilingSettings(**CEILINGS.model_dump()),
        topology=Topology(total_slots=4, async_slots=2, interactive_slots=1),
        scan_batch=50,
        fallback_poll_seconds=1.0,
        admission_backoff_seconds=1.0,
    )


def body(**overrides: Any) -> dict[str, Any]:
    """A valid create body (daily 09:00 Paris); keyword arguments replace fields."""
    values: dict[str, Any] = {
        "title": "Morning briefing",
        "instruction": "Summarize the overnight news about the projects I follow.",
        "cadence": {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"},
        "agent_id": str(AGENT_ID),
        "agent_version": AGENT_VERSION,
        "policy_profile": POLICY,
        "requested_scopes": ["memory.read"],
        "limits": LIMITS.to_json(),
        "run_timeout_seconds": 600,
        "misfire_grace_seconds": 900,
        "max_consecutive_failures": 2,
    }
    values.update(overrides)
    return values


def update_body(detail: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """The full-definition PATCH body a client builds from a point read (spec "Native
    Apple schedule browser"): the revision's own fields less its identity fields."""
    revision = dict(detail["revision"])
    for name in ("schedule_id", "revision", "timezone", "created_by_principal_id", "created_at"):
        revision.pop(name)
    revision["expected_revision"] = detail["current_revision"]
    revision.update(overrides)
    return revision


@dataclass
class HttpWorld:
    admin: PostgresUnitOfWorkFactory
    plane: ControlPlane
    settings: Settings
    clock: VirtualClock
    ids: SeededIds
    base_url: str
    tokens: dict[tuple[str, str], str]
    token_path: Path
    client: httpx.AsyncClient
    roles: list[Any] = field(default_factory=list)

    def auth(self, who: Principal = OWNER) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[(who.tenant_id, who.principal_id)]}"}

    async def call(
        self, method: str, path: str, who: Principal | None = OWNER, **kwargs: Any
    ) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}))
        if who is not None:
            headers.update(self.auth(who))
        return await self.client.request(method, path, headers=headers, **kwargs)

    async def create(self, key: str, who: Principal = OWNER, **overrides: Any) -> httpx.Response:
        return await self.call(
            "POST", "/v1/schedules", who, json=body(**overrides), headers={"Idempotency-Key": key}
        )

    def scheduler(self) -> SchedulerRole:
        role = build_scheduler(
            SchedulerSettings.of(self.settings),
            clock=self.clock,
            ids=self.ids.fork(f"scheduler-{len(self.roles)}"),
        )
        self.roles.append(role)
        return role

    def run_worker(self, priority: RunPriority = RunPriority.ASYNC) -> RunWorkerRole:
        """A run worker of one priority class (the async one by default)."""
        role = build_run_worker(
            self.settings,
            priority,
            clock=self.clock,
            ids=self.ids.fork(f"runner-{len(self.roles)}"),
        )
        self.roles.append(role)
        return role

    async def sql(self, statement: str, **params: Any) -> list[Row]:
        async with self.admin.engine.begin() as conn:
            result = await conn.execute(text(statement), params)
            return [dict(r._mapping) for r in result.all()] if result.returns_rows else []

    async def counts(self) -> dict[str, int]:
        out = {}
        for table in ("schedules", "schedule_revisions", "schedule_idempotency_keys"):
            query = f"SELECT count(*) AS n FROM {table}"  # noqa: S608 - constant names
            out[table] = int((await self.sql(query))[0]["n"])
        out["process_events"] = int(
            (await self.sql("SELECT count(*) AS n FROM process_events"))[0]["n"]
        )
        return out


@contextlib.asynccontextmanager
async def http_world(
    pg_url: str,
    principals: Iterable[Principal] = (OWNER,),
    *,
    start: datetime = START,
    seed: int = 0,
    app_factory: Any = create_app,
) -> AsyncIterator[HttpWorld]:
    """The served control plane; ``app_factory(plane)`` may wrap the real app (tests of
    the tests plant a wrong server this way)."""
    who = list(principals)
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=4)
    await seed_durable(admin, who, at=start)
    clock = VirtualClock(start)
    ids = SeededIds(seed)
    settings = settings_for(pg_url)
    with tempfile.TemporaryDirectory(prefix="sched-http-") as tmp:
        path = Path(tmp) / "tokens.json"
        tokens = {}
        for p in who:
            _, token = issue_token(path, p.tenant_id, p.principal_id, start)
            tokens[(p.tenant_id, p.principal_id)] = token
        plane = build_control_plane(
            settings, clock=clock, ids=ids.fork("api"), tokens=TokenFile(path)
        )
        world: HttpWorld | None = None
        try:
            async with (
                running(app_factory(plane)) as url,
                httpx.AsyncClient(base_url=url, timeout=30) as client,
            ):
                world = HttpWorld(admin, plane, settings, clock, ids, url, tokens, path, client)
                yield world
        finally:
            if world is not None:
                for role in world.roles:
                    await role.close()
            await plane.close()
            await admin.dispose()


# ------------------------------------------------------------- planted servers


Rewrite = Any  # Callable[[str, str, dict[str, Any]], dict[str, Any]]


class RewritingApp:
    """An ASGI wrapper that rewrites JSON response bodies: a plausible wrong server for
    the tests of the tests. ``rewrite(method, path, body) -> body``."""

    def __init__(self, app: Any, rewrite: Rewrite) -> None:
        self.app = app
        self.rewrite = rewrite

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: Any) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            raw = b"".join(chunks)
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            if parsed is not None:
                raw = json.dumps(self.rewrite(scope["method"], scope["path"], parsed)).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            headers.append((b"content-length", str(len(raw)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": raw})

        await self.app(scope, receive, capture)


def planted(rewrite: Rewrite) -> Any:
    """An ``app_factory`` serving the real app behind ``rewrite``."""

    def factory(plane: ControlPlane) -> Any:
        return RewritingApp(create_app(plane), rewrite)

    return factory
