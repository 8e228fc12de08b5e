"""What the HTTP edge serves: the API role plus the run, session and readiness services,
the bearer-token file and the one bearer authentication of every edge (ADR 1511)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scheduling.adapters.postgres.schema_head import HEAD_REVISION
from scheduling.adapters.token_file import TokenFile
from scheduling.bootstrap.api import ApiRole, build_api
from scheduling.config import Settings
from scheduling.ports.clock import Clock
from scheduling.ports.directories import SchedulePrincipalDirectory
from scheduling.ports.ids import IdGenerator
from scheduling.ports.readiness import Readiness
from scheduling.ports.telemetry import TelemetrySource
from scheduling.ports.tokens import TokenDirectory
from scheduling.service.bearer import BearerAuthenticator
from scheduling.service.runs import RunService
from scheduling.service.schedule_views import ScheduleViews
from scheduling.service.schedules import ScheduleService
from scheduling.service.session_access import SessionAccess
from scheduling.storage import Storage


@dataclass
class ControlPlane:
    """What the HTTP edge serves: the API role's services, the durable principal
    directory request scopes come from, the bearer-token directory and readiness."""

    api: ApiRole
    principals: SchedulePrincipalDirectory
    authenticator: TokenDirectory
    views: ScheduleViews
    runs: RunService
    sessions: SessionAccess
    readiness: Readiness
    clock: Clock
    telemetry: TelemetrySource | None = None

    @property
    def service(self) -> ScheduleService:
        return self.api.service

    async def close(self) -> None:
        await self.api.close()


def build_control_plane(
    settings: Settings,
    *,
    clock: Clock,
    ids: IdGenerator,
    tokens: TokenDirectory,
    storage: Storage | None = None,
) -> ControlPlane:
    """``build_api`` plus the run, session and readiness services of the HTTP edge.

    Production additionally requires the durable principal directory (the one the
    scheduler reads at firing), enforced by ``build_api``'s refusals."""
    api = build_api(settings, clock=clock, ids=ids, storage=storage)
    assert api.principals is not None
    # Fleet-wide aggregates need the trusted login (RLS would show the API role nothing).
    telemetry = api.storage.telemetry(clock, settings.ceilings.to_ceilings())
    return ControlPlane(
        telemetry=telemetry,
        api=api,
        principals=api.principals,
        authenticator=tokens,
        views=ScheduleViews(api.uow),
        runs=RunService(api.uow, clock),
        sessions=SessionAccess(api.uow, clock),
        readiness=api.storage.readiness(HEAD_REVISION, "api"),
        clock=clock,
    )


def token_file(path: Path) -> TokenDirectory:
    """The local bearer-token file (digests only, ADR 1501)."""
    return TokenFile(path)


# ------------------------------------------------------------ edge authentication
# One bearer authentication for every edge taking a token per request (ADR 1511): the
# digest-only token file names the caller, the durable principal directory its scopes.


def edge_authenticator(
    principals: SchedulePrincipalDirectory, tokens: TokenDirectory
) -> BearerAuthenticator:
    """Bearer authentication over ``tokens`` (e.g. ``token_file(path)``) and the role's
    principal directory (``ToolsRole.api.principals`` for the MCP edge)."""
    return BearerAuthenticator(tokens, principals)
