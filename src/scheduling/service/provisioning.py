"""Provisioning principals and agent versions from operator files (no Python needed).

``import_principals`` upserts principal rows into the durable directory; a row whose
enabled flag, scopes and authority inputs are unchanged is left alone, so re-running an
import is a no-op and does not move its authority version. ``import_agents`` writes
immutable agent versions (re-importing identical content is a no-op; different content
under an existing version is refused) and moves the floating active pointer when asked.
Every file is validated completely before anything is written; one transaction writes
it all or nothing.

``apply_batch`` takes ONE document for a deployment (ADR 2260): tenants, each with its
principals and the named tokens they should hold, and agent versions. Principals and
agents are written as the imports write them, in one transaction; a token is named by
(tenant, principal, name) and never carries a secret, so the service only decides which
named tokens are missing (the caller's token file says which exist) and checks, in the
same transaction, that each one's principal is held enabled. The caller issues them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints
from pydantic import ValidationError as PydanticValidationError

from scheduling.domain.canonical import content_hash
from scheduling.domain.errors import ConflictError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits
from scheduling.domain.text import check_tree
from scheduling.ports.clock import Clock
from scheduling.ports.records import AgentVersionRecord, PrincipalRecord
from scheduling.ports.unit_of_work import UnitOfWork, UnitOfWorkFactory
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
UNKNOWN_PRINCIPAL = reason(
    "schedule.provision.unknown_principal",
    "A token (tokens add, or a batch file) names a tenant/principal the durable directory"
    " does not hold",
)
PRINCIPAL_DISABLED = reason(
    "schedule.provision.principal_disabled",
    "A token (tokens add, or a batch file) names a principal the durable directory holds disabled",
)
INPUT_MISSING = reason(
    "schedule.provision.input_missing",
    "A provisioning command needs a trusted login URL or a token file it was not given",
)
VERSION_CONFLICT = reason(
    "schedule.provision.agent_version_conflict",
    "An agent version already exists with different content (versions are immutable)",
)

_NAME = r"^\S{1,200}$"


class _Closed(BaseModel):
    # Built on the first validation, not at import: a command that reads no file (``tokens
    # add``, every role) does not pay for nine schemas it never checks.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


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


_Name = Annotated[str, StringConstraints(pattern=_NAME)]


class TenantPrincipal(_Closed):
    principal_id: _Name
    enabled: StrictBool = True
    scopes: list[str]
    authority_inputs: dict[str, Any] = Field(default_factory=dict)


class TokenRequest(_Closed):
    """A named token the principal should hold; never its secret (ADR 2260)."""

    principal_id: _Name
    name: _Name


class TenantEntry(_Closed):
    principals: list[TenantPrincipal] = Field(default_factory=list)
    tokens: list[TokenRequest] = Field(default_factory=list)


class BatchFile(_Closed):
    tenants: dict[_Name, TenantEntry] = Field(default_factory=dict)
    agents: list[AgentEntry] = Field(default_factory=list)


@dataclass(frozen=True)
class TokenName:
    tenant_id: str
    principal_id: str
    name: str

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.principal_id}/{self.name}"


@dataclass(frozen=True)
class ParsedBatch:
    principals: PrincipalsFile
    agents: AgentsFile
    tokens: tuple[TokenName, ...]


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
    # Every string (keys too) storable and the nesting bounded before the schema, any
    # hash or SQL: a NUL would reach PostgreSQL (which refuses it, and logs the
    # statement), a spec nested hundreds of levels deep the recursive content hash.
    check_tree("file", document)
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


def parse_batch(document: Any) -> ParsedBatch:
    """The whole batch file, validated as the imports validate theirs (closed schema,
    scopes, duplicates, agent limits) plus duplicate token names."""
    parsed: BatchFile = _parse(BatchFile, document)
    principals = {
        "principals": [
            {"tenant_id": tenant_id, **entry.model_dump()}
            for tenant_id, tenant in parsed.tenants.items()
            for entry in tenant.principals
        ]
    }
    agents = {"agents": [entry.model_dump(mode="json") for entry in parsed.agents]}
    tokens: list[TokenName] = []
    for tenant_id, tenant in parsed.tenants.items():
        for request in tenant.tokens:
            named = TokenName(tenant_id, request.principal_id, request.name)
            if named in tokens:
                raise ValidationError(DUPLICATE_ENTRY, f"token {named} is listed twice")
            tokens.append(named)
    return ParsedBatch(parse_principals(principals), parse_agents(agents), tuple(tokens))


def parse_agents(document: Any) -> AgentsFile:
    parsed: AgentsFile = _parse(AgentsFile, document)
    seen: set[tuple[UUID, str]] = set()
    for entry in parsed.agents:
        if (entry.agent_id, entry.version) in seen:
            raise ValidationError(DUPLICATE_ENTRY, f"{entry.agent_id}@{entry.version} twice")
        seen.add((entry.agent_id, entry.version))
        RunLimits.model_validate(entry.limits)  # finite positive bounds, stable codes
    return parsed


@dataclass
class BatchReport:
    """What ``apply_batch`` did (or, with ``commit=False``, would do). ``tokens_to_issue``
    are the named tokens the caller must now issue; ``tokens_held`` those already held."""

    principals: ImportReport
    agents: ImportReport
    tokens_to_issue: list[TokenName]
    tokens_held: list[TokenName]

    @property
    def changed(self) -> bool:
        return bool(
            self.principals.created
            or self.principals.updated
            or self.agents.created
            or self.agents.activated
            or self.tokens_to_issue
        )


class ProvisioningService:
    def __init__(self, uow: UnitOfWorkFactory, clock: Clock) -> None:
        self._uow = uow
        self._clock = clock

    async def check_principal(self, tenant_id: str, principal_id: str) -> None:
        """Refuse a token for a principal the directory lacks or holds disabled."""
        await check_principal(self._uow, tenant_id, principal_id)

    async def import_principals(self, document: Any) -> ImportReport:
        parsed = parse_principals(document)
        async with self._uow.begin() as uow:
            report = await self._put_principals(uow, parsed)
            await uow.commit()
        return report

    async def import_agents(self, document: Any) -> ImportReport:
        parsed = parse_agents(document)
        async with self._uow.begin() as uow:
            report = await self._put_agents(uow, parsed)
            await uow.commit()
        return report

    async def apply_batch(
        self, document: Any, held: set[TokenName], *, commit: bool = True
    ) -> BatchReport:
        """Principals and agents in one transaction; each named token not in ``held``
        is reported to issue, after its principal is checked (in that transaction, so
        one the file itself creates counts) to be in the directory and enabled. Any
        refusal rolls everything back. ``commit=False`` reports without writing."""
        parsed = parse_batch(document)
        async with self._uow.begin() as uow:
            principals = await self._put_principals(uow, parsed.principals)
            agents = await self._put_agents(uow, parsed.agents)
            missing = [named for named in parsed.tokens if named not in held]
            for named in parsed.tokens:
                await check_may_hold_token(uow, named.tenant_id, named.principal_id)
            if commit:
                await uow.commit()
        return BatchReport(principals, agents, missing, [n for n in parsed.tokens if n in held])

    async def _put_principals(self, uow: UnitOfWork, parsed: PrincipalsFile) -> ImportReport:
        report = ImportReport()
        now = self._clock.now()
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
        return report

    async def _put_agents(self, uow: UnitOfWork, parsed: AgentsFile) -> ImportReport:
        report = ImportReport()
        now = self._clock.now()
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
        return report


async def check_may_hold_token(uow: UnitOfWork, tenant_id: str, principal_id: str) -> None:
    """A token names a principal the durable directory holds enabled: a token for anyone
    else would be a credential that names nobody (or someone who may not act)."""
    record = await uow.principals.get(tenant_id, principal_id)
    if record is None:
        raise ValidationError(
            UNKNOWN_PRINCIPAL,
            f"the directory has no principal {principal_id!r} in tenant {tenant_id!r}",
        )
    if not record.enabled:
        raise ValidationError(PRINCIPAL_DISABLED, f"{tenant_id}/{principal_id} is disabled")


async def check_principal(uow: UnitOfWorkFactory, tenant_id: str, principal_id: str) -> None:
    """``check_may_hold_token`` in a read-only transaction of its own."""
    async with uow.begin() as tx:
        await check_may_hold_token(tx, tenant_id, principal_id)
