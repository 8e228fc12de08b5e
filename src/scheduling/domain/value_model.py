"""The base of every pydantic domain value: frozen, closed, and never a raw pydantic error.

Pydantic reports type errors, missing and unknown fields as ``pydantic.ValidationError``;
callers of the domain must only ever see ``scheduling.domain.errors.ValidationError`` with
a stable code. Rule violations raised by our own validators are domain errors already
(pydantic v2 lets non-``ValueError`` exceptions propagate unchanged).

``model_copy(update=...)`` re-validates, so no copy can smuggle in an illegal state.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

import pydantic
from pydantic import BaseModel, ConfigDict

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason

NAIVE_DATETIME = reason(
    "schedule.value.naive_datetime",
    "A datetime without a UTC offset was given where an instant is required",
)


def aware_utc(value: datetime, *, code: str = NAIVE_DATETIME, field: str = "datetime") -> datetime:
    """``value`` as an aware UTC datetime; a naive value raises ``code``."""
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        raise ValidationError(code, f"{field} must carry a UTC offset", {"field": field})
    return value.astimezone(UTC)


class DomainModel(BaseModel):
    """Frozen, ``extra="forbid"`` pydantic model whose construction fails only with domain errors.

    Subclasses set ``_area`` (e.g. ``"revision"``): pydantic's own failures map to the
    registered codes ``schedule.<area>.missing_field`` / ``unknown_field`` / ``invalid_field``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    # A class variable, not a private attribute: a private attribute with a default is
    # copied into every instance at construction (``init_private_attributes``), about
    # 2 us per model and a dozen models per materialization (ADR 2460).
    _area: ClassVar[str] = "value"

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            raise _translate(type(self), self._area, exc) from None

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        try:
            return super().model_validate(obj, **options)
        except pydantic.ValidationError as exc:
            raise _translate(cls, cls._area, exc) from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with ``update`` the result is fully re-validated (never a partial state)."""
        if not update:
            return super().model_copy(deep=deep)
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(update)
        return type(self).model_validate(data)


def field_codes(area: str) -> tuple[str, str, str]:
    """Register and return the (missing, unknown, invalid) field codes of ``area``."""
    article = "An" if area[:1] in "aeiou" else "A"
    return (
        reason(f"schedule.{area}.missing_field", f"A required {area} field is absent"),
        reason(
            f"schedule.{area}.unknown_field",
            f"{article} {area} field is not part of the closed model",
        ),
        reason(
            f"schedule.{area}.invalid_field", f"{article} {area} field has the wrong type or form"
        ),
    )


def _translate(
    model: type[DomainModel], area: str, exc: pydantic.ValidationError
) -> ValidationError:
    missing, unknown, invalid = field_codes(area)
    first = exc.errors(include_url=False, include_input=False)[0]
    location = ".".join(str(part) for part in first["loc"])
    kind = first["type"]
    code = {"missing": missing, "extra_forbidden": unknown}.get(kind, invalid)
    # The message names the field and the problem, never the rejected input value.
    return ValidationError(
        code,
        f"{model.__name__}.{location}: {kind}",
        {"model": model.__name__, "field": location, "error_type": kind},
    )
