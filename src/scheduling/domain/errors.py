"""The one error hierarchy. Every error carries a stable ``schedule.*`` reason code.

Adapters translate driver errors into these; the HTTP edge maps each class to one
status and renders the spec's envelope; tool failures carry the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SchedulingError(Exception):
    """Root of every error the product raises on purpose.

    ``code`` is a registered reason code; ``message`` is safe to show (never echoes a
    secret or an instruction); ``details`` holds non-secret structured facts.
    """

    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


class ValidationError(SchedulingError):
    """Input that does not construct a legal value. Nothing was changed."""


class NotFoundError(SchedulingError):
    """Absent, or not visible to the caller (the two are indistinguishable on purpose)."""


class ConflictError(SchedulingError):
    """A stale revision, an illegal transition or a reused key. Nothing was changed."""


class AuthorizationError(SchedulingError):
    """The caller lacks an exact scope. Nothing was changed."""


class UnavailableError(SchedulingError):
    """A dependency (database, configuration) cannot serve the request right now."""
