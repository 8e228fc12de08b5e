"""The composition root: the only package that wires adapters to ports (ADR 2200).

One module per role or concern, one composition root: every role, test, gate,
scenario, the soak and the benchmarks build through these builders.

* ``api`` - ``build_api``: ``ScheduleService`` over the API role;
* ``scheduler`` - ``build_scheduler`` over a ``SchedulerSettings`` view that holds no
  other role's credential;
* ``run_worker`` - ``build_run_worker``: a ``RunWorker`` claiming its priority class;
* ``maintenance`` - ``build_maintenance``: the retention purge and the repair;
* ``development`` - ``build_development``: every role in one process, memory adapters;
* ``control_plane`` - ``build_control_plane``, ``token_file``, ``edge_authenticator``;
* ``tools`` - ``build_tools``: the governed tool pipeline with the schedule tools;
* ``mcp`` - ``build_mcp`` and the MCP servers (the only module importing ``mcp``);
* ``serving`` - the HTTP edge served (the only module importing FastAPI and uvicorn);
* ``metrics`` - the scheduler's and run worker's Prometheus observers;
* ``refusals`` - the stable ``schedule.bootstrap.*`` codes, ``StartupRefused`` and
  the production checks; ``choices`` - what every role derives from ``Settings``.

Production startup refuses (``StartupRefused``, stable codes): settings that fail
``validate_release``, in-memory repositories, a non-durable principal directory, the
allow-all admission controller and a worker topology without both reserves. Clocks
and id generators come from the caller: only the CLI constructs the system ones.
No business logic lives here.

Tests and the harness inject what production derives from settings - the
``storage`` (``scheduling.storage``, ADR 2171: then the role neither opens nor closes
it), a probe, and a few doubles named in each builder's keyword arguments - and get the
same classes wired the same way (``tests/integration/test_production_wiring.py``).
Whatever differs per database is the storage's choice: no builder tests which factory
it was given.

``from scheduling.bootstrap import build_api`` keeps working: this package imports a
submodule only when one of its names is first asked for (module ``__getattr__``), so
building the scheduler never imports FastAPI, uvicorn or the MCP SDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scheduling.bootstrap.api import ApiRole, ScheduleServiceArgs, build_api
    from scheduling.bootstrap.control_plane import (
        ControlPlane,
        build_control_plane,
        edge_authenticator,
        token_file,
    )
    from scheduling.bootstrap.development import DevelopmentStack, build_development
    from scheduling.bootstrap.maintenance import MaintenanceRole, build_maintenance
    from scheduling.bootstrap.mcp import (
        McpRole,
        build_mcp,
        serve_mcp_http,
        serve_mcp_stdio,
    )
    from scheduling.bootstrap.metrics import run_worker_metrics, scheduler_metrics
    from scheduling.bootstrap.refusals import (
        ALLOW_ALL_ADMISSION,
        DATABASE_URL_MISSING,
        DEVELOPMENT_IN_PRODUCTION,
        DIRECTORY_NOT_DURABLE,
        FEATURE_DISABLED,
        MEMORY_REPOSITORIES,
        REFUSED,
        RETRY_SETTINGS,
        WORKER_TOPOLOGY,
        StartupRefused,
        production_problems,
    )
    from scheduling.bootstrap.run_worker import RunWorkerRole, build_run_worker
    from scheduling.bootstrap.scheduler import (
        SchedulerRole,
        SchedulerSettings,
        ScheduleWorkerArgs,
        StopAwareWake,
        build_scheduler,
    )
    from scheduling.bootstrap.serving import build_http_app, running_http, serve_http
    from scheduling.bootstrap.tools import ToolsRole, build_tools

# Which submodule defines each public name (imported on first use).
_HOME = {
    **dict.fromkeys(("ApiRole", "ScheduleServiceArgs", "build_api"), "api"),
    **dict.fromkeys(
        ("ControlPlane", "build_control_plane", "edge_authenticator", "token_file"),
        "control_plane",
    ),
    **dict.fromkeys(("DevelopmentStack", "build_development"), "development"),
    **dict.fromkeys(("MaintenanceRole", "build_maintenance"), "maintenance"),
    **dict.fromkeys(("McpRole", "build_mcp", "serve_mcp_http", "serve_mcp_stdio"), "mcp"),
    **dict.fromkeys(("run_worker_metrics", "scheduler_metrics"), "metrics"),
    **dict.fromkeys(
        (
            "ALLOW_ALL_ADMISSION",
            "DATABASE_URL_MISSING",
            "DEVELOPMENT_IN_PRODUCTION",
            "DIRECTORY_NOT_DURABLE",
            "FEATURE_DISABLED",
            "MEMORY_REPOSITORIES",
            "REFUSED",
            "RETRY_SETTINGS",
            "WORKER_TOPOLOGY",
            "StartupRefused",
            "production_problems",
        ),
        "refusals",
    ),
    **dict.fromkeys(("RunWorkerRole", "build_run_worker"), "run_worker"),
    **dict.fromkeys(
        (
            "SchedulerRole",
            "SchedulerSettings",
            "StopAwareWake",
            "ScheduleWorkerArgs",
            "build_scheduler",
        ),
        "scheduler",
    ),
    **dict.fromkeys(("build_http_app", "running_http", "serve_http"), "serving"),
    **dict.fromkeys(("ToolsRole", "build_tools"), "tools"),
}

__all__ = [
    "ALLOW_ALL_ADMISSION",
    "DATABASE_URL_MISSING",
    "DEVELOPMENT_IN_PRODUCTION",
    "DIRECTORY_NOT_DURABLE",
    "FEATURE_DISABLED",
    "MEMORY_REPOSITORIES",
    "REFUSED",
    "RETRY_SETTINGS",
    "WORKER_TOPOLOGY",
    "ApiRole",
    "ControlPlane",
    "DevelopmentStack",
    "MaintenanceRole",
    "McpRole",
    "RunWorkerRole",
    "ScheduleServiceArgs",
    "ScheduleWorkerArgs",
    "SchedulerRole",
    "SchedulerSettings",
    "StartupRefused",
    "StopAwareWake",
    "ToolsRole",
    "build_api",
    "build_control_plane",
    "build_development",
    "build_http_app",
    "build_maintenance",
    "build_mcp",
    "build_run_worker",
    "build_scheduler",
    "build_tools",
    "edge_authenticator",
    "production_problems",
    "run_worker_metrics",
    "running_http",
    "scheduler_metrics",
    "serve_http",
    "serve_mcp_http",
    "serve_mcp_stdio",
    "token_file",
]


def __getattr__(name: str) -> object:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
