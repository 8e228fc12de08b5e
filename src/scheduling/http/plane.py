"""What the HTTP edge serves, as the edge sees it: a protocol, so the edge needs no
import of the composition root (``bootstrap.ControlPlane`` is the one implementation;
``bootstrap.build_http_app`` puts the two together)."""

from __future__ import annotations

from typing import Protocol

from scheduling.ports.directories import SchedulePrincipalDirectory
from scheduling.ports.readiness import Readiness
from scheduling.ports.telemetry import TelemetrySource
from scheduling.ports.tokens import TokenDirectory
from scheduling.service.runs import RunService
from scheduling.service.schedule_views import ScheduleViews
from scheduling.service.schedules import ScheduleService
from scheduling.service.session_access import SessionAccess


class Plane(Protocol):
    """The API role's services, the durable principal directory request scopes come
    from, the bearer-token directory, readiness and the fleet telemetry (or none)."""

    @property
    def service(self) -> ScheduleService: ...
    @property
    def principals(self) -> SchedulePrincipalDirectory: ...
    @property
    def authenticator(self) -> TokenDirectory: ...
    @property
    def views(self) -> ScheduleViews: ...
    @property
    def runs(self) -> RunService: ...
    @property
    def sessions(self) -> SessionAccess: ...
    @property
    def readiness(self) -> Readiness: ...
    @property
    def telemetry(self) -> TelemetrySource | None: ...
