"""Tenant ceilings (spec "Configuration and deployment", "Domain model").

Enabling scheduling requires finite ceilings for timeout, per-run cost, active runs,
rate, daily cost and monthly cost; the revision bounds (steps, model calls, tool
calls) and the misfire grace are capped the same way. Every ceiling is positive and
finite, so a tenant without a configured ceiling cannot schedule at all.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Self

from pydantic import StrictInt, field_validator, model_validator

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.revision import RunLimits
from scheduling.domain.value_model import DomainModel, field_codes

field_codes("tenancy")
NON_POSITIVE_CEILING = reason(
    "schedule.tenancy.non_positive_ceiling",
    "A tenant ceiling is missing, zero, negative or not finite",
)


class TenantCeilings(DomainModel):
    """The finite per-tenant caps a definition and an admission are checked against."""

    _area = "tenancy"

    max_run_timeout_seconds: StrictInt
    max_misfire_grace_seconds: StrictInt
    max_steps: StrictInt
    max_model_calls: StrictInt
    max_tool_calls: StrictInt
    max_cost_per_run: Decimal
    max_active_runs: StrictInt
    max_materializations_per_minute: StrictInt
    max_daily_cost: Decimal
    max_monthly_cost: Decimal

    @field_validator("max_cost_per_run", "max_daily_cost", "max_monthly_cost", mode="before")
    @classmethod
    def _money(cls, value: Any) -> Decimal:
        if isinstance(value, bool) or not isinstance(value, int | str | Decimal):
            raise ValidationError(NON_POSITIVE_CEILING, "cost ceilings are decimal amounts")
        amount = Decimal(value)
        if not amount.is_finite() or amount <= 0:
            raise ValidationError(NON_POSITIVE_CEILING, "cost ceilings are finite and positive")
        return amount

    @model_validator(mode="after")
    def _positive(self) -> Self:
        for name, value in self:
            if value <= 0:
                raise ValidationError(
                    NON_POSITIVE_CEILING, f"{name} must be positive", {"field": name}
                )
        return self

    def exceeded_by(self, limits: RunLimits, run_timeout_seconds: int, grace: int) -> list[str]:
        """The names of the revision fields above their ceilings (empty when within)."""
        over: list[str] = []
        pairs: tuple[tuple[str, int | Decimal, int | Decimal], ...] = (
            ("run_timeout_seconds", run_timeout_seconds, self.max_run_timeout_seconds),
            ("misfire_grace_seconds", grace, self.max_misfire_grace_seconds),
            ("max_steps", limits.max_steps, self.max_steps),
            ("max_model_calls", limits.max_model_calls, self.max_model_calls),
            ("max_tool_calls", limits.max_tool_calls, self.max_tool_calls),
            ("max_cost", limits.max_cost, self.max_cost_per_run),
        )
        for name, value, ceiling in pairs:
            if value > ceiling:
                over.append(name)
        return over
