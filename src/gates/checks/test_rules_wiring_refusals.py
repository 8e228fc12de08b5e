"""``rule.config.release_validation``: what the composition root refuses to start.

Release validation is only as good as the startup that honours it. From ``Settings``
alone, each builder of ``scheduling.bootstrap``:

* refuses its role while that role's schedule feature flag is off
  (``schedule.bootstrap.feature_disabled``, and nothing else in development): the
  scheduler while ``AGENT_SCHEDULE_WORKER_ENABLED`` is off, the API and the HTTP control
  plane while ``AGENT_SCHEDULE_API_ENABLED`` is off, the MCP edge while either is;
* in production, with settings that pass ``validate_release``, refuses the in-memory
  development adapters it is handed, each with its own stable code - the scheduler
  in-memory repositories, the static principal directory and allow-all admission; the
  API the first two; the run worker and the maintenance role in-memory repositories;
  a run capacity without both reserves; and the development builder altogether.

No database is needed: every refusal comes before a connection.

Tests of the test: ``scheduling-gates mutate`` (``wiring.scheduler_flag_off_runs``,
``wiring.api_flag_off_serves``, ``wiring.scheduler_enabled_by_api_flag``,
``wiring.api_enabled_by_worker_flag``, ``wiring.mcp_one_flag_enough``,
``wiring.scheduler_memory_storage_in_production``,
``wiring.api_memory_storage_in_production``,
``wiring.maintenance_memory_in_production``,
``wiring.run_worker_unreserved_capacity_in_production``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from gates.checks.test_rules_release import CEILINGS
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.config import Settings, validate_release
from scheduling.ports.runtime import QueueCapacity, RunPriority
from scheduling.testing import MemoryStorage
from simulation.engine.clock import VirtualClock
from simulation.engine.ids import SeededIds
from simulation.worlds.service import START, world_settings

RULE = "rule.config.release_validation"
PRODUCTION = {
    "ENVIRONMENT": "production",
    "API_ENABLED": "1",
    "WORKER_ENABLED": "1",
    "STORAGE": "postgres",
    "PRINCIPAL_DIRECTORY": "durable",
    "ADMISSION": "postgres",
    "DATABASE_URL": "postgresql://owner:pw@127.0.0.1:9/scheduling",
    "SCHEDULER_DATABASE_URL": "postgresql://scheduler_login:pw@127.0.0.1:9/scheduling",
    "RUN_WORKER_DATABASE_URL": "postgresql://run_worker_login:pw@127.0.0.1:9/scheduling",
    "MAINTENANCE_DATABASE_URL": "postgresql://maintenance_login:pw@127.0.0.1:9/scheduling",
    "TOTAL_SLOTS": "4",
    "INTERACTIVE_RESERVED_SLOTS": "1",
    "ASYNC_RESERVED_SLOTS": "1",
    "ASYNC_SLOTS": "2",
    "INTERACTIVE_SLOTS": "2",
    "SCAN_BATCH": "100",
    "FALLBACK_POLL_SECONDS": "30",
    "ADMISSION_BACKOFF_SECONDS": "30",
    **CEILINGS,
}
AGENT = UUID(int=7)


def production() -> Settings:
    settings = Settings.from_env({f"AGENT_SCHEDULE_{k}": v for k, v in PRODUCTION.items()})
    assert validate_release(settings) == [], validate_release(settings)
    return settings


def refused(build: Callable[[], Any]) -> list[str]:
    """The codes ``build`` refuses with (it must refuse)."""
    with pytest.raises(bootstrap.StartupRefused) as caught:
        build()
    return sorted(caught.value.codes)


def edge() -> dict[str, Any]:
    return {"clock": VirtualClock(START), "ids": SeededIds(3)}


def mcp(settings: Settings, tokens: Any) -> Callable[[], Any]:
    def build() -> Any:
        return bootstrap.build_mcp(
            settings, tokens=tokens, default_agent_id=AGENT, storage=MemoryStorage(), **edge()
        )

    return build


@pytest.mark.rule(RULE)
def test_a_role_whose_flag_is_off_refuses_to_start(
    tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    off = bootstrap.FEATURE_DISABLED
    tokens = bootstrap.token_file(tmp_path / "tokens.json")
    worker_off = world_settings(AGENT_SCHEDULE_WORKER_ENABLED="0")
    api_off = world_settings(AGENT_SCHEDULE_API_ENABLED="0")
    both_off = world_settings(AGENT_SCHEDULE_API_ENABLED="0", AGENT_SCHEDULE_WORKER_ENABLED="0")
    found = {
        "scheduler, worker flag off": refused(
            lambda: bootstrap.build_scheduler(
                bootstrap.SchedulerSettings.of(worker_off), storage=MemoryStorage(), **edge()
            )
        ),
        "scheduler, both flags off": refused(
            lambda: bootstrap.build_scheduler(
                bootstrap.SchedulerSettings.of(both_off), storage=MemoryStorage(), **edge()
            )
        ),
        "API, api flag off": refused(
            lambda: bootstrap.build_api(api_off, storage=MemoryStorage(), **edge())
        ),
        "control plane, api flag off": refused(
            lambda: bootstrap.build_control_plane(
                api_off, tokens=tokens, storage=MemoryStorage(), **edge()
            )
        ),
        **{
            f"MCP edge, {name}": refused(mcp(settings, tokens))
            for name, settings in (
                ("worker flag off", worker_off),
                ("api flag off", api_off),
                ("both flags off", both_off),
            )
        },
    }
    gate_evidence.record("refused", found)
    wrong = {name: codes for name, codes in found.items() if codes != [off]}
    assert not wrong, f"not refused for its flag alone: {wrong}"


@pytest.mark.rule(RULE)
def test_production_refuses_the_development_adapters(gate_evidence: GateEvidence) -> None:
    b = bootstrap
    settings = production()
    found = {
        "scheduler": refused(
            lambda: b.build_scheduler(
                b.SchedulerSettings.of(settings), storage=MemoryStorage(), **edge()
            )
        ),
        "api": refused(lambda: b.build_api(settings, storage=MemoryStorage(), **edge())),
        "run worker": refused(
            lambda: b.build_run_worker(
                settings, RunPriority.ASYNC, storage=MemoryStorage(), **edge()
            )
        ),
        "run worker without reserves": refused(
            lambda: b.build_run_worker(
                settings,
                RunPriority.ASYNC,
                storage=MemoryStorage(),
                capacity=QueueCapacity(4, 0, 0),
                **edge(),
            )
        ),
        "maintenance": refused(
            lambda: b.build_maintenance(settings, storage=MemoryStorage(), **edge())
        ),
        "development": refused(lambda: b.build_development(settings, **edge())),
    }
    expected = {
        "scheduler": sorted(
            [b.MEMORY_REPOSITORIES, b.DIRECTORY_NOT_DURABLE, b.ALLOW_ALL_ADMISSION]
        ),
        "api": sorted([b.MEMORY_REPOSITORIES, b.DIRECTORY_NOT_DURABLE]),
        "run worker": [b.MEMORY_REPOSITORIES],
        "run worker without reserves": sorted([b.MEMORY_REPOSITORIES, b.WORKER_TOPOLOGY]),
        "maintenance": [b.MEMORY_REPOSITORIES],
        "development": [b.DEVELOPMENT_IN_PRODUCTION],
    }
    gate_evidence.record("refused", found)
    assert found == expected
