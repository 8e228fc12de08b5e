"""Provisioning principals and agent versions from operator files (no Python needed).

``import_principals`` upserts principal rows into the durable directory; a row whose
enabled flag, scopes and authority inputs are unchanged is left alone, so re-running an
import is a no-op and does not move its authority version. ``import_agents`` writes
immutable agent versions (re-importing identical content is a no-op; different content
under an existing version is refused) and moves the floating active pointer when asked.
Every file is validated completely before anything is written; one transaction writes
it all or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictBool
from pydantic import ValidationError as PydanticValidationError

from scheduling.domain.canonical import content_hash
from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits
from scheduling.ports.clock import Clock
from scheduling.ports.records import AgentVersionRecord, PrincipalRecord
from scheduling.ports.unit_of_work import UnitOfWorkFactory
from scheduling.service.validation import PLATFORM_SCOPES

FILE_INVALID = reason(
    "schedule.provision.file_invalid", "A provisioning file does not match its closed schema"
)
UNKNOWN_SCOPE = reason(
    "schedule.provision.unknown_scope",
    "A provisioned principal names a scope outside the vocabulary",
)
DUPLICATE_ENTRY = reason(
    "schedule.provision.duplicate_entry",
    "A provisioning file lists the same principal or version twice",
)
VERSION_CONFLICT = reason(
    "schedule.provision.agent_version_conflict",
    "An agent version already exists with different content (versions are immutable)",
)

_NAME = r"^\S{1,200}$"


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PrincipalEntry(_Closed):
    tenant_id: str = Field(pattern=_NAME)
    principal_id: str = Field(pattern=_NAME)
    enabled: StrictBool = True
    scopes: list[str]
    authority_inputs: dict[str, Any] = Field(default_factory=dict)


class PrincipalsFile(_Closed):
    principals: list[PrincipalEntry]


class AgentEntry(_Closed):
    agent_id: UUID
    version: str = Field(pattern=_NAME)
    policy_profile: str = Field(pattern=_NAME)
    limits: dict[str, Any]
    spec: dict[str, Any] = Field(default_factory=dict)
    active: StrictBool = False


class AgentsFile(_Closed):
    agents: list[AgentEntry]


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    activated: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = []
        for name in ("created", "updated", "unchanged", "activated"):
            for item in getattr(self, name):
                out.append(f"{name}: {item}")
        return out


def _parse(model: type[BaseModel], document: Any) -> Any:
    try:
        return model.model_validate(document)
    except PydanticValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['type']}" for e in exc.errors()
        ]
        raise ValidationError(
            FILE_INVALID, "the file does not match its schema", {"problems": problems}
        ) from None


def parse_principals(document: Any) -> PrincipalsFile:
    parsed: PrincipalsFile = _parse(PrincipalsFile, document)
    seen: set[tuple[str, str]] = set()
    for entry in parsed.principals:
        key = (entry.tenant_id, entry.principal_id)
        if key in seen:
            raise ValidationError(DUPLICATE_ENTRY, f"{key[0]}/{key[1]} is listed twice")
        seen.add(key)
        unknown = sorted(set(entry.scopes) - PLATFORM_SCOPES)
        if unknown:
            raise ValidationError(
                UNKNOWN_SCOPE, f"{key[0]}/{key[1]}: unknown scopes", {"scopes": unknown}
            )
    return parsed


def parse_agents(document: Any) -> AgentsFile:
    parsed: AgentsFile = _parse(AgentsFile, document)
    seen: set[tuple[UUID, str]] = set()
    for entry in parsed.agents:
        if (entry.agent_id, entry.version) in seen:
            raise ValidationError(DUPLICATE_ENTRY, f"{entry.agent_id}@{entry.version} twice")
        seen.add((entry.agent_id, entry.version))
        RunLimits.model_validate(entry.limits)  # finite positive bounds, stable codes
    return parsed


class ProvisioningService:
    def __init__(self, uow: UnitOfWorkFactory, clock: Clock) -> None:
        self._uow = uow
        self._clock = clock

    async def import_principals(self, document: Any) -> ImportReport:
        parsed = parse_principals(document)
        report = ImportReport()
        now = self._clock.now()
        async with self._uow.begin() as uow:
            for entry in parsed.principals:
                name = f"{entry.tenant_id}/{entry.principal_id}"
                current = await uow.principals.get(entry.tenant_id, entry.principal_id)
                scopes = frozenset(entry.scopes)
                if current is not None and (
                    current.enabled,
                    current.scopes,
                    current.authority_inputs,
                ) == (entry.enabled, scopes, entry.authority_inputs):
                    report.unchanged.append(name)
                    continue
                await uow.principals.put(
                    PrincipalRecord(
                        tenant_id=entry.tenant_id,
                        principal_id=entry.principal_id,
                        enabled=entry.enabled,
                        scopes=scopes,
                        authority_inputs=dict(entry.authority_inputs),
                        created_at=now if current is None else current.created_at,
                        updated_at=now,
                    )
                )
                (report.created if current is None else report.updated).append(name)
            await uow.commit()
        return report

    async def import_agents(self, document: Any) -> ImportReport:
        parsed = parse_agents(document)
        report = ImportReport()
        now = self._clock.now()
        async with self._uow.begin() as uow:
            for entry in parsed.agents:
                name = f"{entry.agent_id}@{entry.version}"
                limits = RunLimits.model_validate(entry.limits).to_json()
                digest = content_hash(
                    {"spec": entry.spec, "policy_profile": entry.policy_profile, "limits": limits}
                )
                current = await uow.agents.get_version(entry.agent_id, entry.version)
                if current is None:
                    await uow.agents.put_version(
                        AgentVersionRecord(
                            agent_id=entry.agent_id,
                            version=entry.version,
                            policy_profile=entry.policy_profile,
                            spec=dict(entry.spec),
                            limits=limits,
                            content_hash=digest,
                            created_at=now,
                        )
                    )
                    report.created.append(name)
                elif (current.policy_profile, current.spec, current.limits) == (
                    entry.policy_profile,
                    entry.spec,
                    limits,
                ):
                    report.unchanged.append(name)
                else:
                    raise ConflictError(
                        VERSION_CONFLICT, f"{name} exists with other content", {"agent": name}
                    )
                if entry.active:
                    active = await uow.agents.active(entry.agent_id)
                    if active is None or active.version != entry.version:
                        await uow.agents.set_active(entry.agent_id, entry.version, now)
                        report.activated.append(name)
            await uow.commit()
        return report
