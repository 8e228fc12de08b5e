"""Translate driver errors into domain errors with stable codes, at the adapter edge."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.exc import DBAPIError

from scheduling.domain.errors import (
    AuthorizationError,
    ConflictError,
    SchedulingError,
    UnavailableError,
    ValidationError,
)
from scheduling.ports.repositories import (
    CONSTRAINT,
    DUPLICATE,
    FORBIDDEN,
    MISSING_REFERENCE,
    RETRY,
    UNAVAILABLE,
)

# SQLSTATE -> (error class, code). Classes 08 (connection) and 57 (shutdown) are
# handled by prefix below.
_BY_SQLSTATE: dict[str, tuple[type[SchedulingError], str]] = {
    "23505": (ConflictError, DUPLICATE),
    "23514": (ValidationError, CONSTRAINT),
    "23502": (ValidationError, CONSTRAINT),
    "23503": (ConflictError, MISSING_REFERENCE),
    "42501": (AuthorizationError, FORBIDDEN),
    "40001": (ConflictError, RETRY),
    "40P01": (ConflictError, RETRY),
}


def _driver_error(exc: BaseException) -> Any:
    orig = getattr(exc, "orig", None)
    return getattr(orig, "__cause__", None) or orig


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error wrapped by SQLAlchemy, if any."""
    driver = _driver_error(exc)
    for candidate in (driver, getattr(exc, "orig", None)):
        state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(state, str):
            return state
    return None


def translate(exc: BaseException) -> SchedulingError:
    """The domain error for a driver error (the original is kept as ``__cause__``)."""
    state = sqlstate_of(exc)
    driver = _driver_error(exc)
    details: dict[str, Any] = {"sqlstate": state}
    constraint = getattr(driver, "constraint_name", None)
    if constraint:
        details["constraint"] = constraint
    table = getattr(driver, "table_name", None)
    if table:
        details["table"] = table
    if state is not None and state in _BY_SQLSTATE:
        cls, code = _BY_SQLSTATE[state]
        return cls(code, f"database rejected the statement ({state})", details)
    if state is not None and state[:2] in ("08", "57", "53"):
        return UnavailableError(UNAVAILABLE, "the database is unavailable", details)
    what = _what_failed(driver or exc)
    details["error"] = what
    label = f"SQLSTATE {state}, {what}" if state else what
    return UnavailableError(UNAVAILABLE, f"unexpected database error ({label})", details)


# A driver message can quote a connection URL; its userinfo never reaches a message.
_USERINFO = re.compile(r"(\w+://)[^@/\s]+@")
_PASSWORD = re.compile(r"(password\s*[=:]\s*)\S+", re.IGNORECASE)


def _what_failed(error: BaseException) -> str:
    """The driver's own words (type and first line), with any credentials removed."""
    first = (str(error).strip().splitlines() or [""])[0][:200]
    first = _PASSWORD.sub(r"\1***", _USERINFO.sub(r"\1***@", first))
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# SQLSTATE classes after which the connection itself is unusable: connection
# exception, operator intervention (terminated backend, shutdown), resources.
_BROKEN_CLASSES = ("08", "57", "53")


def broken_connection(exc: BaseException) -> bool:
    """True when ``exc`` leaves the connection unusable: a connection-class SQLSTATE or
    a driver error with none at all (a protocol or interface failure)."""
    if isinstance(exc, OSError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    state = sqlstate_of(exc)
    return state is None or state[:2] in _BROKEN_CLASSES
