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
* ``schema`` - upgrade to the migration head, read a database's revision (``migrate``);
  ``schema_head`` - the head this build ships and whether a database is at it, without
  Alembic;
* ``privileges`` - the deployment logins' release checks (``release-check``);
  ``deployment_roles`` - the role names a prefix gives and the kinds a login joins;
  ``logins`` - creating and rotating those logins (``logins``);
* ``provisioning`` - the provisioning service over the trusted login; ``token_entries`` -
  the token file (issue, revoke, read);
* ``refusals`` - the stable ``schedule.bootstrap.*`` codes, ``StartupRefused`` and
  the production checks; ``choices`` - what every role derives from ``Settings``;
  ``owned`` - ``OwnedStorage``, the ``close`` of a role over one storage.

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

from typing import TYPE_CHECKING

from scheduling.lazy_exports import lazy_exports

if TYPE_CHECKING:
    # ``X as X``: an explicit re-export, so mypy sees the names though ``__all__`` is
    # computed (mypy reads only a literal ``__all__``).
    from scheduling.bootstrap.api import ApiRole as ApiRole
    from scheduling.bootstrap.api import ScheduleServiceArgs as ScheduleServiceArgs
    from scheduling.bootstrap.api import build_api as build_api
    from scheduling.bootstrap.control_plane import ControlPlane as ControlPlane
    from scheduling.bootstrap.control_plane import build_control_plane as build_control_plane
    from scheduling.bootstrap.control_plane import edge_authenticator as edge_authenticator
    from scheduling.bootstrap.control_plane import token_file as token_file
    from scheduling.bootstrap.deployment_roles import DEFAULT_ROLE_PREFIX as DEFAULT_ROLE_PREFIX
    from scheduling.bootstrap.deployment_roles import ROLE_KINDS as ROLE_KINDS
    from scheduling.bootstrap.deployment_roles import role_names as role_names
    from scheduling.bootstrap.development import DevelopmentStack as DevelopmentStack
    from scheduling.bootstrap.development import build_development as build_development
    from scheduling.bootstrap.logins import create_login as create_login
    from scheduling.bootstrap.logins import generate_password as generate_password
    from scheduling.bootstrap.logins import rotate_password as rotate_password
    from scheduling.bootstrap.maintenance import MaintenanceRole as MaintenanceRole
    from scheduling.bootstrap.maintenance import build_maintenance as build_maintenance
    from scheduling.bootstrap.mcp import McpRole as McpRole
    from scheduling.bootstrap.mcp import build_mcp as build_mcp
    from scheduling.bootstrap.mcp import serve_mcp_http as serve_mcp_http
    from scheduling.bootstrap.mcp import serve_mcp_stdio as serve_mcp_stdio
    from scheduling.bootstrap.metrics import run_worker_metrics as run_worker_metrics
    from scheduling.bootstrap.metrics import scheduler_metrics as scheduler_metrics
    from scheduling.bootstrap.privileges import pooling_problems as pooling_problems
    from scheduling.bootstrap.privileges import (
        run_worker_release_problems as run_worker_release_problems,
    )
    from scheduling.bootstrap.privileges import (
        scheduler_release_problems as scheduler_release_problems,
    )
    from scheduling.bootstrap.provisioning import FILE_INVALID as FILE_INVALID
    from scheduling.bootstrap.provisioning import INPUT_MISSING as INPUT_MISSING
    from scheduling.bootstrap.provisioning import TokenName as TokenName
    from scheduling.bootstrap.provisioning import open_provisioning as open_provisioning
    from scheduling.bootstrap.refusals import ALLOW_ALL_ADMISSION as ALLOW_ALL_ADMISSION
    from scheduling.bootstrap.refusals import DATABASE_URL_MISSING as DATABASE_URL_MISSING
    from scheduling.bootstrap.refusals import DEVELOPMENT_IN_PRODUCTION as DEVELOPMENT_IN_PRODUCTION
    from scheduling.bootstrap.refusals import DIRECTORY_NOT_DURABLE as DIRECTORY_NOT_DURABLE
    from scheduling.bootstrap.refusals import FEATURE_DISABLED as FEATURE_DISABLED
    from scheduling.bootstrap.refusals import MEMORY_REPOSITORIES as MEMORY_REPOSITORIES
    from scheduling.bootstrap.refusals import REFUSED as REFUSED
    from scheduling.bootstrap.refusals import RETRY_SETTINGS as RETRY_SETTINGS
    from scheduling.bootstrap.refusals import WORKER_TOPOLOGY as WORKER_TOPOLOGY
    from scheduling.bootstrap.refusals import StartupRefused as StartupRefused
    from scheduling.bootstrap.refusals import production_problems as production_problems
    from scheduling.bootstrap.run_worker import RunWorkerRole as RunWorkerRole
    from scheduling.bootstrap.run_worker import build_run_worker as build_run_worker
    from scheduling.bootstrap.scheduler import SchedulerRole as SchedulerRole
    from scheduling.bootstrap.scheduler import SchedulerSettings as SchedulerSettings
    from scheduling.bootstrap.scheduler import ScheduleWorkerArgs as ScheduleWorkerArgs
    from scheduling.bootstrap.scheduler import StopAwareWake as StopAwareWake
    from scheduling.bootstrap.scheduler import build_scheduler as build_scheduler
    from scheduling.bootstrap.schema import current_revision as current_revision
    from scheduling.bootstrap.schema import head_revision as head_revision
    from scheduling.bootstrap.schema import upgrade_to_head as upgrade_to_head
    from scheduling.bootstrap.schema_head import HEAD_REVISION as HEAD_REVISION
    from scheduling.bootstrap.schema_head import at_head as at_head
    from scheduling.bootstrap.serving import build_http_app as build_http_app
    from scheduling.bootstrap.serving import running_http as running_http
    from scheduling.bootstrap.serving import serve_http as serve_http
    from scheduling.bootstrap.token_entries import TokenEntry as TokenEntry
    from scheduling.bootstrap.token_entries import issue_token as issue_token
    from scheduling.bootstrap.token_entries import read_entries as read_entries
    from scheduling.bootstrap.token_entries import revoke_token as revoke_token
    from scheduling.bootstrap.tools import ToolsRole as ToolsRole
    from scheduling.bootstrap.tools import build_tools as build_tools

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
    **dict.fromkeys(("DEFAULT_ROLE_PREFIX", "ROLE_KINDS", "role_names"), "deployment_roles"),
    **dict.fromkeys(("create_login", "generate_password", "rotate_password"), "logins"),
    **dict.fromkeys(
        ("pooling_problems", "run_worker_release_problems", "scheduler_release_problems"),
        "privileges",
    ),
    **dict.fromkeys(
        ("FILE_INVALID", "INPUT_MISSING", "TokenName", "open_provisioning"), "provisioning"
    ),
    **dict.fromkeys(("TokenEntry", "issue_token", "read_entries", "revoke_token"), "token_entries"),
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
    **dict.fromkeys(("current_revision", "head_revision", "upgrade_to_head"), "schema"),
    **dict.fromkeys(("HEAD_REVISION", "at_head"), "schema_head"),
    **dict.fromkeys(("build_http_app", "running_http", "serve_http"), "serving"),
    **dict.fromkeys(("ToolsRole", "build_tools"), "tools"),
}

__all__ = sorted(_HOME)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOME)
