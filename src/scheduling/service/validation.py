"""The one definition validator (spec "Public API": "Validation rejects ...").

Order matters: credential-shaped text is rejected first, so a secret never reaches a
later step, an error message, a log line or a row. Then the closed values (cadence,
limits, revision fields), the scopes, the website binding, the pinned agent and its
policy profile, and the tenant ceilings. Every failure is a domain error with a
stable ``schedule.*`` code; no error echoes user text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast
from uuid import UUID

from scheduling.domain.cadence import Cadence, parse_cadence
from scheduling.domain.canonical import content_hash
from scheduling.domain.errors import AuthorizationError, UnavailableError, ValidationError
from scheduling.domain.idempotency import MAX_IDEMPOTENCY_KEY as MAX_IDEMPOTENCY_KEY
from scheduling.domain.idempotency import check_idempotency_key as check_idempotency_key
from scheduling.domain.identity import SCOPE_REQUIRED, Principal
from scheduling.domain.reasons import reason
from scheduling.domain.recurrence.engine import next_after
from scheduling.domain.revision import RunLimits, ScheduleRevision
from scheduling.domain.secrets import SecretFinding, SecretScanner, reject_secrets
from scheduling.domain.text import check_text, check_tree
from scheduling.ports.directories import (
    AgentRegistry,
    AuthoritySnapshot,
    BrowserProfileDirectory,
    BrowserProfileState,
    SchedulePrincipalDirectory,
    TenantConfiguration,
)
from scheduling.ports.repositories import AgentRepository
from scheduling.service.values import ScheduleDefinition, SchedulePatch

PRINCIPAL_UNAVAILABLE = reason(
    "schedule.auth.principal_unavailable",
    "The caller is unknown to the principal directory or disabled",
)
UNKNOWN_SCOPE = reason(
    "schedule.validation.unknown_scope", "A requested scope is not in the platform vocabulary"
)
SCOPE_NOT_HELD = reason(
    "schedule.validation.scope_not_held", "A requested scope is not one of the caller's scopes"
)
AGENT_UNKNOWN = reason(
    "schedule.validation.agent_unknown", "The agent has no active version to pin"
)
AGENT_VERSION_UNKNOWN = reason(
    "schedule.validation.agent_version_unknown", "The pinned agent version does not exist"
)
POLICY_MISMATCH = reason(
    "schedule.validation.policy_mismatch",
    "policy_profile differs from the profile of the pinned agent version",
)
CEILING_EXCEEDED = reason(
    "schedule.validation.ceiling_exceeded",
    "A timeout, grace or run bound is above the tenant's ceiling",
)
TENANT_NOT_CONFIGURED = reason(
    "schedule.tenancy.not_configured", "The tenant has no scheduling ceilings configured"
)
BROWSER_SCOPE_REQUIRED = reason(
    "schedule.validation.browser_scope_required",
    "A website binding needs browser.profile.read held and requested",
)
BROWSER_PROFILE_UNAVAILABLE = reason(
    "schedule.validation.browser_profile_unavailable",
    "The bound browser profile is missing or not the caller's",
)
BROWSER_PROFILE_NOT_READY = reason(
    "schedule.validation.browser_profile_not_ready", "The bound browser profile is not READY"
)
NO_FUTURE_OCCURRENCE = reason(
    "schedule.validation.no_future_occurrence",
    "The cadence has no nominal instant strictly after now",
)

BROWSER_SCOPE = "browser.profile.read"

# The closed platform scope vocabulary a schedule may request (exact names, no wildcard).
PLATFORM_SCOPES = frozenset(
    {
        "schedule.read",
        "schedule.write",
        "schedule.cancel",
        "run.read",
        "run.cancel",
        "session.read",
        "memory.read",
        "memory.write",
        "knowledge.read",
        "browser.profile.read",
        "browser.navigate",
        "browser.observe",
        "web.search",
        "web.fetch",
    }
)


class Scanner(Protocol):
    """The secret scanner's port: findings name a kind and a span, never the value."""

    def scan(self, text: str) -> list[SecretFinding]: ...


@dataclass(frozen=True)
class ValidatedDefinition:
    """A definition that passed every rule; ``build`` makes its immutable revision.

    ``built`` is the revision ``validate`` already constructed to apply the domain's own
    rules; ``build`` returns it when asked for the same identity (a create builds once).
    ``first_fire`` is the first nominal instant strictly after the validation's ``now``
    that ``require_future`` computed (a create's ``next_fire_at``, not computed twice);
    None when it was not asked for."""

    fields: dict[str, Any]
    cadence: Cadence
    built: ScheduleRevision | None = None
    first_fire: datetime | None = None

    def build(
        self, schedule_id: UUID, revision: int, principal_id: str, at: datetime
    ) -> ScheduleRevision:
        made = self.built
        if made is not None and (
            made.schedule_id,
            made.revision,
            made.created_by_principal_id,
            made.created_at,
        ) == (schedule_id, revision, principal_id, at):
            return made
        return ScheduleRevision(
            schedule_id=schedule_id,
            revision=revision,
            created_by_principal_id=principal_id,
            created_at=at,
            **self.fields,
        )


def check_definition_text(definition: ScheduleDefinition) -> None:
    """``schedule.text.invalid`` for a NUL or lone surrogate in any text of a definition
    (title, instruction, every cadence string, scopes, agent version, policy profile,
    limit strings). Runs before scanning, hashing and SQL on every edge (spec: bad
    input is refused with a stable code; PostgreSQL cannot store either)."""
    check_tree("title", definition.title)
    check_tree("instruction", definition.instruction)
    check_tree("cadence", definition.cadence)
    check_tree("requested_scopes", sorted(map(str, definition.requested_scopes)))
    check_tree("agent_version", definition.agent_version)
    check_tree("policy_profile", definition.policy_profile)
    if isinstance(definition.limits, Mapping):
        check_tree("limits", definition.limits)


def check_patch_text(patch: SchedulePatch) -> None:
    """``check_definition_text`` for the closed conversational patch."""
    check_tree("title", patch.title)
    check_tree("instruction", patch.instruction)
    if isinstance(patch.at, str):
        check_text("at", patch.at)
    check_tree("cadence", patch.cadence)


def require_scope(principal: Principal, scope: str) -> None:
    """The exact-scope check every operation makes before anything else."""
    if not principal.has(scope):
        raise AuthorizationError(SCOPE_REQUIRED, f"{scope} is required", {"scope": scope})


def normalized_request(
    definition: ScheduleDefinition, cadence: Cadence | None = None
) -> dict[str, Any]:
    """The canonical JSON of a definition as requested (the create idempotency input).

    Values are normalized (canonical cadence and limits, sorted scopes) so equal
    requests hash equally; an unbound definition omits ``browser_profile_id`` so it
    keeps the hash it had before website binding existed. ``cadence`` is the
    definition's already parsed cadence, if the caller has it.
    """
    return normalized_with_limits(definition, cadence)[0]


def run_limits_of(definition: ScheduleDefinition) -> RunLimits:
    """The definition's limits as validated ``RunLimits`` (given as such or as fields)."""
    limits = definition.limits
    return limits if isinstance(limits, RunLimits) else RunLimits(**limits)


def normalized_with_limits(
    definition: ScheduleDefinition, cadence: Cadence | None = None
) -> tuple[dict[str, Any], RunLimits]:
    """``normalized_request`` and the ``RunLimits`` it validated on the way, which a
    create hands to ``validate`` (``limits=``) so they are built once (ADR 2600).
    Evaluated in the order the one dict display was, so the first invalid value is
    the one reported, as before."""
    parsed = parse_cadence(definition.cadence) if cadence is None else cadence
    out: dict[str, Any] = {
        "title": definition.title,
        "instruction": definition.instruction,
        "cadence": parsed.to_payload(),
        "agent_id": str(definition.agent_id),
        "agent_version": definition.agent_version,
        "policy_profile": definition.policy_profile,
        "requested_scopes": sorted(definition.requested_scopes),
    }
    run_limits = run_limits_of(definition)
    out["limits"] = run_limits.to_json()
    out["run_timeout_seconds"] = definition.run_timeout_seconds
    out["misfire_grace_seconds"] = definition.misfire_grace_seconds
    out["max_consecutive_failures"] = definition.max_consecutive_failures
    if definition.browser_profile_id is not None:
        out["browser_profile_id"] = str(definition.browser_profile_id)
    return out, run_limits


def request_hash(operation: str, body: Mapping[str, Any]) -> str:
    return content_hash({"operation": operation, "body": dict(body)})


_BOUND_FIELDS = frozenset(
    {"run_timeout_seconds", "misfire_grace_seconds", "max_consecutive_failures"}
)


class DefinitionValidator:
    """Checks a definition against the caller's current authority and the tenant."""

    def __init__(
        self,
        *,
        principals: SchedulePrincipalDirectory,
        agents: AgentRegistry,
        browser_profiles: BrowserProfileDirectory,
        tenants: TenantConfiguration,
        scanner: Scanner,
        scope_vocabulary: frozenset[str] = PLATFORM_SCOPES,
    ) -> None:
        self._principals = principals
        self._agents = agents
        self._profiles = browser_profiles
        self._tenants = tenants
        self._scanner = scanner
        self._vocabulary = scope_vocabulary

    def scan_text(self, title: str, instruction: str) -> None:
        """Reject credential-shaped text (the error names the field and kinds only)."""
        # reject_secrets only calls ``scan``; any Scanner serves.
        scanner = cast(SecretScanner, self._scanner)
        reject_secrets("title", title, scanner)
        reject_secrets("instruction", instruction, scanner)

    async def authority(
        self, principal: Principal, scope: str, known: AuthoritySnapshot | None = None
    ) -> AuthoritySnapshot:
        """The caller's current authority; it must exist, be enabled and hold ``scope``.

        ``known`` is the snapshot the edge read for this same request (the one
        authentication read, ADR 2240); without it (or for another principal) the
        directory is read now."""
        require_scope(principal, scope)
        if known is not None and (known.tenant_id, known.principal_id) == (
            principal.tenant_id,
            principal.principal_id,
        ):
            snapshot: AuthoritySnapshot | None = known
        else:
            snapshot = await self._principals.current(principal.tenant_id, principal.principal_id)
        if snapshot is None or not snapshot.enabled:
            raise AuthorizationError(PRINCIPAL_UNAVAILABLE, "the caller cannot schedule now")
        if not snapshot.has(scope):
            raise AuthorizationError(SCOPE_REQUIRED, f"{scope} is required", {"scope": scope})
        return snapshot

    async def validate(
        self,
        principal: Principal,
        authority: AuthoritySnapshot,
        definition: ScheduleDefinition,
        *,
        now: datetime,
        require_future: bool,
        cadence: Cadence | None = None,
        scanned: bool = False,
        schedule_id: UUID | None = None,
        agents: AgentRepository | None = None,
        limits: RunLimits | None = None,
    ) -> ValidatedDefinition:
        """Every rule, in order; returns the normalized revision fields, which pin
        ``authority.authority_version`` (the version the owner approves under).

        A caller that already scanned the text (``scanned``) and parsed the cadence
        (``cadence``) passes them, so neither happens twice; with ``schedule_id`` the
        revision built to apply the domain's rules is revision 1 of that schedule at
        ``now`` (a create's own, returned by ``build``). With ``agents``, the agent
        repository of the caller's open unit of work, the agent is pinned inside that
        transaction (the registry ``joined`` to it, ADR 2310) instead of one of its own.
        ``limits`` are the definition's limits the caller already validated
        (``normalized_with_limits``); ``first_fire`` carries the ``require_future``
        instant, so neither is computed twice (ADR 2600)."""
        if not scanned:
            self.scan_text(definition.title, definition.instruction)
        if cadence is None:
            cadence = parse_cadence(definition.cadence)
        if limits is None:
            limits = run_limits_of(definition)
        self._check_scopes(principal, authority, definition.requested_scopes)
        await self._check_browser(principal, definition)
        registry = self._agents if agents is None else self._agents.joined(agents)
        version, profile = await _pin_agent(registry, definition)
        ceilings = await self._tenants.ceilings(principal.tenant_id)
        if ceilings is None:
            raise UnavailableError(TENANT_NOT_CONFIGURED, "scheduling is not configured")
        fields: dict[str, Any] = {
            "title": definition.title,
            "instruction": definition.instruction,
            "agent_id": definition.agent_id,
            "agent_version": version,
            "policy_profile": profile,
            "requested_scopes": frozenset(definition.requested_scopes),
            "browser_profile_id": definition.browser_profile_id,
            "limits": limits,
            "run_timeout_seconds": definition.run_timeout_seconds,
            "cadence": cadence.to_payload(),
            "misfire_grace_seconds": definition.misfire_grace_seconds,
            "max_consecutive_failures": definition.max_consecutive_failures,
            # The owner approves this definition under their current authority; firing
            # fails closed once that authority changes (ADR 1200). Not in the request
            # hash: ``normalized_request`` covers only what the caller sent.
            "authority_version": authority.authority_version,
        }
        # An absent bound (None from a caller's payload) is a missing field, not a type
        # error: drop it so the domain reports ``schedule.revision.missing_field``.
        fields = {k: v for k, v in fields.items() if v is not None or k not in _BOUND_FIELDS}
        # Construct once so the domain's own rules (positive bounds, text bounds) apply
        # before the ceiling comparison reports on values that are legal at all. The
        # revision carries the parsed cadence, so building it parses nothing again.
        identity = UUID(int=0) if schedule_id is None else schedule_id
        built = ValidatedDefinition({**fields, "cadence": cadence}, cadence).build(
            identity, 1, principal.principal_id, now
        )
        over = ceilings.exceeded_by(
            limits, definition.run_timeout_seconds, definition.misfire_grace_seconds
        )
        if over:
            raise ValidationError(CEILING_EXCEEDED, "above the tenant ceiling", {"fields": over})
        first_fire = next_after(cadence, now) if require_future else None
        if require_future and first_fire is None:
            raise ValidationError(NO_FUTURE_OCCURRENCE, "the cadence never fires after now")
        fields["cadence"] = cadence  # a later build re-parses nothing either
        return ValidatedDefinition(
            fields, cadence, built if schedule_id is not None else None, first_fire
        )

    def _check_scopes(
        self, principal: Principal, authority: AuthoritySnapshot, requested: frozenset[str]
    ) -> None:
        unknown = [scope for scope in requested if scope not in self._vocabulary]
        if unknown:
            # A count, never the values: a token pasted as a scope must not come back
            # (ADR 2130). The vocabulary is public; the client can compare itself.
            raise ValidationError(
                UNKNOWN_SCOPE, "unknown scopes requested", {"count": len(unknown)}
            )
        held = principal.scopes & authority.scopes
        missing = sorted(requested - held)
        if missing:
            raise ValidationError(
                SCOPE_NOT_HELD, "requested scopes must be the caller's", {"scopes": missing}
            )

    async def _check_browser(self, principal: Principal, definition: ScheduleDefinition) -> None:
        profile_id = definition.browser_profile_id
        if profile_id is None:
            return
        if BROWSER_SCOPE not in definition.requested_scopes or not principal.has(BROWSER_SCOPE):
            raise ValidationError(BROWSER_SCOPE_REQUIRED, f"{BROWSER_SCOPE} is required")
        profile = await self._profiles.get(principal.tenant_id, principal.principal_id, profile_id)
        if profile is None:
            raise ValidationError(BROWSER_PROFILE_UNAVAILABLE, "the browser profile is unavailable")
        if profile.state is not BrowserProfileState.READY:
            raise ValidationError(BROWSER_PROFILE_NOT_READY, "the browser profile is not ready")


async def _pin_agent(agents: AgentRegistry, definition: ScheduleDefinition) -> tuple[str, str]:
    if definition.agent_version is None:
        spec = await agents.active(definition.agent_id)
        if spec is None:
            raise ValidationError(AGENT_UNKNOWN, "the agent has no active version")
    else:
        spec = await agents.get(definition.agent_id, definition.agent_version)
        if spec is None:
            raise ValidationError(AGENT_VERSION_UNKNOWN, "the agent version does not exist")
    profile = definition.policy_profile
    if profile is not None and profile != spec.policy_profile:
        raise ValidationError(POLICY_MISMATCH, "policy_profile differs from the agent's")
    return spec.version, spec.policy_profile
