"""Production startup refusals of the composition root, each shown alone against an
accepted control, plus the development builder (memory, allow-all) end to end.

No refusal needs a server: engines are created lazily and refused before any connect.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import fields
from datetime import timedelta
from typing import get_args, get_type_hints

import pytest

from scheduling import bootstrap as b
from scheduling import config as c
from scheduling.adapters.memory.directories import (
    ConfiguredTenantConfiguration,
    StaticPrincipalDirectory,
)
from scheduling.adapters.memory.uow import MemoryUnitOfWorkFactory
from scheduling.adapters.postgres.admission import PostgresAdmissionController
from scheduling.adapters.postgres.directories import DurablePrincipalDirectory
from scheduling.config import Settings
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.service.admission import AllowAllAdmission
from scheduling.storage import MemoryStorage, PostgresStorage
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import (
    AGENT_ID,
    AGENT_VERSION,
    LIMITS,
    POLICY,
    START,
    definition,
    principal,
)
from testsupport.production_env import GOOD

URL = "postgresql://nobody:pw@127.0.0.1:1/never"


def settings(**overrides: str) -> Settings:
    env = dict(GOOD)
    env.update({f"AGENT_SCHEDULE_{k}": v for k, v in overrides.items()})
    return Settings.from_env(env)


# ------------------------------------------------------------- the adapter guard


async def test_guard_accepts_the_production_adapters() -> None:
    storage = PostgresStorage(URL)
    try:
        found = b.production_problems(
            storage=storage,
            principals=DurablePrincipalDirectory(storage.factory("api")),
            admission=PostgresAdmissionController(ConfiguredTenantConfiguration()),
            capacity=QueueCapacity(4, 1, 1),
        )
    finally:
        await storage.close()
    assert found == []


@pytest.mark.parametrize(
    ("parts", "code"),
    [
        ({"storage": MemoryStorage()}, b.MEMORY_REPOSITORIES),
        ({"principals": StaticPrincipalDirectory()}, b.DIRECTORY_NOT_DURABLE),
        ({"admission": AllowAllAdmission()}, b.ALLOW_ALL_ADMISSION),
        ({"capacity": QueueCapacity(4, 0, 1)}, b.WORKER_TOPOLOGY),
        ({"capacity": QueueCapacity(4, 1, 0)}, b.WORKER_TOPOLOGY),
    ],
)
def test_guard_refuses_each_development_part(parts: dict[str, object], code: str) -> None:
    found = b.production_problems(**parts)  # type: ignore[arg-type]
    assert [p.split(":", 1)[0] for p in found] == [code]


# ----------------------------------------------------------- through the builders


def refused(call: Callable[[], object]) -> list[str]:
    with pytest.raises(b.StartupRefused) as caught:
        call()
    assert caught.value.code == b.REFUSED
    return caught.value.codes


def test_production_scheduler_refuses_memory_repositories() -> None:
    s = b.SchedulerSettings.of(settings(STORAGE="memory"))
    found = refused(lambda: b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3)))
    assert c.STORAGE_NOT_POSTGRES in found
    assert b.MEMORY_REPOSITORIES in found


def test_production_scheduler_refuses_a_static_principal_directory() -> None:
    s = b.SchedulerSettings.of(settings(PRINCIPAL_DIRECTORY="static"))
    found = refused(lambda: b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3)))
    assert found == [c.DIRECTORY_NOT_DURABLE, b.DIRECTORY_NOT_DURABLE]


def test_production_scheduler_refuses_allow_all_admission() -> None:
    s = b.SchedulerSettings.of(settings(ADMISSION="allow_all"))
    found = refused(lambda: b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3)))
    assert found == [c.ADMISSION_DEVELOPMENT_ONLY, b.ALLOW_ALL_ADMISSION]


def test_production_scheduler_refuses_the_migration_login() -> None:
    s = b.SchedulerSettings.of(settings(SCHEDULER_DATABASE_URL=GOOD["AGENT_SCHEDULE_DATABASE_URL"]))
    found = refused(lambda: b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3)))
    assert found == [c.SCHEDULER_LOGIN_MISSING]


def test_production_api_refuses_memory_and_static_directories() -> None:
    s = settings(STORAGE="memory", PRINCIPAL_DIRECTORY="static")
    found = refused(lambda: b.build_api(s, clock=VirtualClock(START), ids=SeededIds(3)))
    assert b.MEMORY_REPOSITORIES in found
    assert b.DIRECTORY_NOT_DURABLE in found


@pytest.mark.parametrize("priority", list(RunPriority))
def test_production_run_workers_refuse_a_topology_without_reserves(priority: RunPriority) -> None:
    s = settings(INTERACTIVE_RESERVED_SLOTS="0")
    found = refused(
        lambda: b.build_run_worker(s, priority, clock=VirtualClock(START), ids=SeededIds(3))
    )
    assert found == [c.INTERACTIVE_RESERVE, b.WORKER_TOPOLOGY]


def test_run_workers_refuse_inconsistent_slot_counts_in_any_environment() -> None:
    s = settings(ENVIRONMENT="development", TOTAL_SLOTS="1")
    found = refused(
        lambda: b.build_run_worker(
            s, RunPriority.ASYNC, clock=VirtualClock(START), ids=SeededIds(3)
        )
    )
    assert found == [b.WORKER_TOPOLOGY]


def test_disabled_flags_refuse_the_api_and_the_scheduler() -> None:
    off = settings(API_ENABLED="0", WORKER_ENABLED="0", ENVIRONMENT="development")
    assert refused(lambda: b.build_api(off, clock=VirtualClock(START), ids=SeededIds(3))) == [
        b.FEATURE_DISABLED
    ]
    s = b.SchedulerSettings.of(off)
    assert refused(lambda: b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3))) == [
        b.FEATURE_DISABLED
    ]


async def test_development_scheduler_accepts_development_parts() -> None:
    s = b.SchedulerSettings.of(
        settings(ENVIRONMENT="development", STORAGE="memory", ADMISSION="allow_all")
    )
    role = b.build_scheduler(s, clock=VirtualClock(START), ids=SeededIds(3))
    assert isinstance(role.admission, AllowAllAdmission)
    assert isinstance(role.storage, MemoryStorage)
    assert isinstance(role.uow, MemoryUnitOfWorkFactory)
    await role.close()


# ---------------------------------------------------- no credential can reach it


def test_the_scheduler_builder_cannot_take_a_credential() -> None:
    params = inspect.signature(b.build_scheduler).parameters
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params.values())
    assert all(p.kind is not inspect.Parameter.VAR_POSITIONAL for p in params.values())
    # What tests inject are objects (a factory, doubles, types), never a string: no
    # URL, token or password can be passed beside the credential-free settings view.
    assert {"settings", "clock", "ids", "probe", "stop"} <= set(params)
    hints = get_type_hints(b.build_scheduler)
    assert not [n for n, hint in hints.items() if hint is str or str in get_args(hint)]
    assert not [n for n in params if any(w in n for w in ("url", "token", "secret", "password"))]
    names = {f.name for f in fields(b.SchedulerSettings)}
    words = ("token", "secret", "password", "credential", "bearer", "provider", "api")
    assert not [n for n in names if any(w in n for w in words)]


def test_the_scheduler_view_drops_other_logins() -> None:
    s = settings(
        API_DATABASE_URL="postgresql://api_login:apipw@db/s",
        MAINTENANCE_DATABASE_URL="postgresql://maint:mpw@db/s",
    )
    view = b.SchedulerSettings.of(s)
    text = repr(view)
    assert "apipw" not in text
    assert "mpw" not in text
    assert "owner:pw" not in text  # not even the migration login in production
    assert view.url == GOOD["AGENT_SCHEDULE_SCHEDULER_DATABASE_URL"]


# ------------------------------------------------------------------ development


def test_the_development_builder_refuses_production() -> None:
    assert refused(
        lambda: b.build_development(settings(), clock=VirtualClock(START), ids=SeededIds(3))
    ) == [b.DEVELOPMENT_IN_PRODUCTION]


async def test_the_development_builder_materializes_in_memory() -> None:
    clock, ids = VirtualClock(START), SeededIds(5)
    stack = b.build_development(settings(ENVIRONMENT="development"), clock=clock, ids=ids)
    who = principal("dev-user")
    stack.principals.set(who.tenant_id, who.principal_id, who.scopes)
    stack.agents.add(AGENT_ID, AGENT_VERSION, POLICY, LIMITS)
    stack.agents.activate(AGENT_ID, AGENT_VERSION)
    created = await stack.service.create(who, "k-1", definition())
    fire = created.schedule.next_fire_at
    assert fire is not None
    clock.advance((fire - clock.now() + timedelta(seconds=1)).total_seconds())
    report = await stack.worker.run_once()
    assert report.errors == {}
    assert [r.status.value for r in report.results] == ["decided"]
    assert report.results[0].run_id is not None
