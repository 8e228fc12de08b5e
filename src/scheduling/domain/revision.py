"""RunLimits and the immutable ScheduleRevision (spec "Immutable revision").

A revision's ``cadence`` is the canonical payload dict of ``scheduling.domain.cadence``;
``cadence_value`` is the parsed ``Cadence``. ``to_definition()`` is the exact JSON form
persisted as ``definition JSONB`` (everything except the row's identity columns), and
``from_definition(...)`` rebuilds an equal revision from it.

``authority_version`` is the creator's content-derived authority version at the time
the owner approved this definition (create, full update, patch). It is a non-secret
audit fact, not a credential; firing fails closed when the principal's current version
differs from it (ADR 1200). Revisions written before pinning existed decode to None
and keep the earlier behaviour.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, Self
from uuid import UUID

from pydantic import (
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StrictInt,
    field_validator,
    model_validator,
)

from scheduling.domain.cadence import Cadence, parse_cadence
from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.value_model import DomainModel, aware_utc, field_codes

field_codes("limits")
field_codes("revision")
NON_POSITIVE_BOUND = reason(
    "schedule.limits.non_positive_bound",
    "A run bound (steps, model calls, tool calls, cost) is not positive",
)
NOT_FINITE_COST = reason(
    "schedule.limits.not_finite", "A cost bound is not a finite decimal amount"
)
INVALID_RESERVE = reason(
    "schedule.limits.invalid_reserve",
    "A final-synthesis reserve is negative or not strictly below its total",
)
NON_POSITIVE_TIMEOUT = reason(
    "schedule.revision.non_positive_timeout", "run_timeout_seconds is not positive"
)
NON_POSITIVE_GRACE = reason(
    "schedule.revision.non_positive_grace", "misfire_grace_seconds is not positive"
)
NON_POSITIVE_FAILURE_LIMIT = reason(
    "schedule.revision.non_positive_failure_limit", "max_consecutive_failures is not positive"
)
INVALID_REVISION_NUMBER = reason("schedule.revision.invalid_number", "A revision number is below 1")
EMPTY_TEXT = reason(
    "schedule.revision.empty_text",
    "title, instruction, agent_version, policy_profile or created_by_principal_id is empty",
)
TEXT_TOO_LONG = reason("schedule.revision.text_too_long", "title or instruction exceeds its bound")
INVALID_SCOPE = reason(
    "schedule.revision.invalid_scope", "A requested scope is empty or contains whitespace"
)
TIMEZONE_MISMATCH = reason(
    "schedule.revision.timezone_mismatch",
    "The revision timezone differs from its cadence's timezone (null for ONCE)",
)

MAX_TITLE = 200
MAX_INSTRUCTION = 20_000


def _money(value: Any, field: str, *, positive: bool) -> Decimal:
    if isinstance(value, bool):
        raise ValidationError(
            NOT_FINITE_COST, f"{field} must be a decimal amount", {"field": field}
        )
    try:
        amount = Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    except (InvalidOperation, TypeError, ValueError):
        raise ValidationError(
            NOT_FINITE_COST, f"{field} must be a decimal amount", {"field": field}
        ) from None
    if not amount.is_finite():
        raise ValidationError(NOT_FINITE_COST, f"{field} must be finite", {"field": field})
    if positive and amount <= 0:
        raise ValidationError(NON_POSITIVE_BOUND, f"{field} must be positive", {"field": field})
    if not positive and amount < 0:
        raise ValidationError(INVALID_RESERVE, f"{field} must not be negative", {"field": field})
    # One canonical form per amount: 1.50 and 1.5 are the same bound.
    return Decimal(format(amount.normalize(), "f"))


def format_money(amount: Decimal) -> str:
    """The canonical text of an amount (no exponent, no trailing zeros)."""
    return format(amount.normalize(), "f")


class RunLimits(DomainModel):
    """Finite, positive per-run bounds plus optional final-synthesis reserves.

    A reserve is 0 (no reserve) or strictly below its total (ADR-0078 in the spec).
    """

    _area = "limits"

    max_steps: StrictInt
    max_model_calls: StrictInt
    max_tool_calls: StrictInt
    max_cost: Decimal
    reserve_steps: StrictInt = 0
    reserve_model_calls: StrictInt = 0
    reserve_cost: Decimal = Decimal(0)

    @field_validator("max_cost", mode="before")
    @classmethod
    def _cost(cls, value: Any) -> Decimal:
        return _money(value, "max_cost", positive=True)

    @field_validator("reserve_cost", mode="before")
    @classmethod
    def _reserve(cls, value: Any) -> Decimal:
        return _money(value, "reserve_cost", positive=False)

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        for name in ("max_steps", "max_model_calls", "max_tool_calls"):
            if getattr(self, name) <= 0:
                raise ValidationError(
                    NON_POSITIVE_BOUND, f"{name} must be positive", {"field": name}
                )
        pairs: tuple[tuple[str, int | Decimal, int | Decimal], ...] = (
            ("reserve_steps", self.reserve_steps, self.max_steps),
            ("reserve_model_calls", self.reserve_model_calls, self.max_model_calls),
            ("reserve_cost", self.reserve_cost, self.max_cost),
        )
        for name, reserve, total in pairs:
            if reserve < 0 or (reserve > 0 and reserve >= total):
                raise ValidationError(
                    INVALID_RESERVE, f"{name} must be 0 or below its total", {"field": name}
                )
        return self

    def to_json(self) -> dict[str, Any]:
        """JSON form; money as canonical decimal strings (never floats)."""
        return {
            "max_steps": self.max_steps,
            "max_model_calls": self.max_model_calls,
            "max_tool_calls": self.max_tool_calls,
            "max_cost": format_money(self.max_cost),
            "reserve_steps": self.reserve_steps,
            "reserve_model_calls": self.reserve_model_calls,
            "reserve_cost": format_money(self.reserve_cost),
        }


# The identity columns of a revision row; everything else is its definition.
IDENTITY_FIELDS = ("schedule_id", "revision", "created_by_principal_id", "created_at")


class ScheduleRevision(DomainModel):
    """One complete, immutable schedule definition."""

    _area = "revision"

    schedule_id: UUID
    revision: StrictInt
    title: Annotated[str, Field(strict=True)]
    instruction: Annotated[str, Field(strict=True)]
    agent_id: UUID
    agent_version: Annotated[str, Field(strict=True)]
    policy_profile: Annotated[str, Field(strict=True)]
    requested_scopes: frozenset[str]
    browser_profile_id: UUID | None = None
    authority_version: Annotated[str, Field(strict=True)] | None = None
    limits: RunLimits
    run_timeout_seconds: StrictInt
    cadence: dict[str, object]
    timezone: str | None = None
    misfire_grace_seconds: StrictInt
    max_consecutive_failures: StrictInt
    created_by_principal_id: Annotated[str, Field(strict=True)]
    created_at: datetime

    _cadence: Cadence = PrivateAttr()

    @field_validator("created_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return aware_utc(value, field="created_at")

    @model_validator(mode="after")
    def _invariants(self) -> Self:
        if self.revision < 1:
            raise ValidationError(INVALID_REVISION_NUMBER, "revision must be >= 1")
        for name in (
            "title",
            "instruction",
            "agent_version",
            "policy_profile",
            "created_by_principal_id",
        ):
            if not getattr(self, name).strip():
                raise ValidationError(EMPTY_TEXT, f"{name} must not be empty", {"field": name})
        if len(self.title) > MAX_TITLE or len(self.instruction) > MAX_INSTRUCTION:
            raise ValidationError(TEXT_TOO_LONG, "title or instruction is too long")
        for scope in self.requested_scopes:
            if not scope or any(ch.isspace() for ch in scope):
                raise ValidationError(INVALID_SCOPE, "scopes are non-empty exact names")
        if self.run_timeout_seconds <= 0:
            raise ValidationError(NON_POSITIVE_TIMEOUT, "run_timeout_seconds must be positive")
        if self.misfire_grace_seconds <= 0:
            raise ValidationError(NON_POSITIVE_GRACE, "misfire_grace_seconds must be positive")
        if self.max_consecutive_failures <= 0:
            raise ValidationError(
                NON_POSITIVE_FAILURE_LIMIT, "max_consecutive_failures must be positive"
            )
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _cadence_once(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # The cadence is parsed once per construction (it was three times: the default
        # timezone, the canonical payload, the invariants): its canonical payload is the
        # stored field, an omitted timezone is the cadence's own, an explicit one must
        # agree with it, and the parsed value is kept as ``cadence_value``.
        if isinstance(data, cls) or not isinstance(data, dict) or "cadence" not in data:
            built = handler(data)
            if not hasattr(built, "_cadence"):
                built._cadence = parse_cadence(built.cadence)
            return built
        cadence = parse_cadence(data["cadence"])
        fields = {**data, "cadence": cadence.to_payload()}
        fields.setdefault("timezone", cadence.timezone)
        built = handler(fields)
        if built.timezone != cadence.timezone:
            raise ValidationError(
                TIMEZONE_MISMATCH,
                "timezone must equal the cadence's timezone (null for ONCE)",
                {"cadence_kind": cadence.kind.value},
            )
        built._cadence = cadence
        return built

    @property
    def cadence_value(self) -> Cadence:
        """The parsed, canonical cadence of this revision."""
        return self._cadence

    def to_definition(self) -> dict[str, Any]:
        """The JSON definition stored beside the identity columns (canonical, sorted)."""
        out: dict[str, Any] = {
            "title": self.title,
            "instruction": self.instruction,
            "agent_id": str(self.agent_id),
            "agent_version": self.agent_version,
            "policy_profile": self.policy_profile,
            "requested_scopes": sorted(self.requested_scopes),
            "browser_profile_id": (
                None if self.browser_profile_id is None else str(self.browser_profile_id)
            ),
            "limits": self.limits.to_json(),
            "run_timeout_seconds": self.run_timeout_seconds,
            "cadence": dict(self.cadence),
            "timezone": self.timezone,
            "misfire_grace_seconds": self.misfire_grace_seconds,
            "max_consecutive_failures": self.max_consecutive_failures,
        }
        # Omitted when unpinned, so a definition stored before pinning existed
        # re-encodes to exactly the JSON it was stored as.
        if self.authority_version is not None:
            out["authority_version"] = self.authority_version
        return out

    @classmethod
    def from_definition(
        cls,
        schedule_id: UUID,
        revision: int,
        created_by_principal_id: str,
        created_at: datetime,
        definition: dict[str, Any],
    ) -> ScheduleRevision:
        """Rebuild a revision from its identity columns and stored definition."""
        overlap = set(definition) & set(IDENTITY_FIELDS)
        if overlap:
            _, unknown, _ = field_codes("revision")
            raise ValidationError(
                unknown, "definition repeats identity fields", {"fields": sorted(overlap)}
            )
        data = dict(definition)
        # Old definitions decode with no website binding (spec "Explicit website binding").
        data.setdefault("browser_profile_id", None)
        # ... and with no pinned authority version (ADR 1200).
        data.setdefault("authority_version", None)
        if isinstance(data.get("requested_scopes"), list):
            data["requested_scopes"] = frozenset(data["requested_scopes"])
        return cls(
            schedule_id=schedule_id,
            revision=revision,
            created_by_principal_id=created_by_principal_id,
            created_at=created_at,
            **data,
        )
