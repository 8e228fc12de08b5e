"""What the six schedule tools share: their dependencies, outputs and argument helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from uuid import UUID

from scheduling.domain.cadence import format_instant, parse_cadence
from scheduling.domain.errors import ValidationError
from scheduling.domain.recurrence.engine import next_after
from scheduling.domain.schedule import Schedule
from scheduling.domain.secrets import SecretScanner, reject_secrets
from scheduling.ports.clock import Clock
from scheduling.ports.directories import AgentRegistry, TenantConfiguration
from scheduling.ports.keys import KeyRing
from scheduling.ports.tool_ledger import WebsiteBindings
from scheduling.service.schedules import ScheduleService
from scheduling.service.validation import NO_FUTURE_OCCURRENCE, Scanner


@dataclass(frozen=True)
class ScheduleToolDeps:
    """The application service and the read-only directories the tools consult.

    ``agent_id`` is the default agent: the one whose roster carries these tools and
    whose active version (and its policy profile) a conversational schedule pins;
    ``keys`` is the deployment key ring (ADR 2100; the list cursor's seal).
    """

    service: ScheduleService
    clock: Clock
    agents: AgentRegistry
    tenants: TenantConfiguration
    websites: WebsiteBindings
    agent_id: UUID
    keys: KeyRing
    scanner: Scanner | None = None

    def scan(self, **fields: str | None) -> None:
        """Credential-shaped text fails before it reaches an approval view or a row."""
        scanner = cast(SecretScanner | None, self.scanner)
        for name, value in fields.items():
            if value is not None:
                reject_secrets(name, value, scanner)


def instant(value: Any) -> str | None:
    return None if value is None else format_instant(value)


def mutation_output(schedule: Schedule) -> dict[str, Any]:
    """What a successful mutation returns: identity, revision, state, pause reason, next firing."""
    return {
        "schedule_id": str(schedule.id),
        "current_revision": schedule.current_revision,
        "state": schedule.state.value,
        "pause_reason": None if schedule.pause_reason is None else schedule.pause_reason.value,
        "next_fire_at": instant(schedule.next_fire_at),
    }


def schedule_id(arguments: Mapping[str, Any]) -> UUID:
    # The schema's pattern already admits only the canonical UUID text.
    return UUID(str(arguments["schedule_id"]))


def when_payload(at: Any, cadence: Any) -> dict[str, Any]:
    """The canonical cadence payload of ``at`` (one exact instant) or ``cadence``."""
    raw = {"kind": "ONCE", "at": at} if at is not None else cadence
    return parse_cadence(raw).to_payload()


def require_future(payload: Mapping[str, Any], clock: Clock) -> None:
    if next_after(parse_cadence(payload), clock.now()) is None:
        raise ValidationError(NO_FUTURE_OCCURRENCE, "the cadence never fires after now")
