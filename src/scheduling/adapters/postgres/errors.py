"""Translate driver errors into domain errors with stable codes, at the adapter edge.

``classify`` is the one classification of connection faults (ADR 2220): whatever the
layer that met it (SQLAlchemy's DB-API wrapper, the raw asyncpg exception a connect
raises, a socket error), a fault of the connection or the server is one of
``ConnectionFault``'s kinds, and ``translate`` turns it into an ``UnavailableError``
whose ``details["fault"]`` names the kind: ``DATABASE_UNAVAILABLE`` when the server
refused to serve (nothing listening, starting up or shutting down, out of connection
slots), ``UNAVAILABLE`` when a connection that was serving broke. ``is_transient``
(ports/retry.py) reads those, never the driver's types.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import asyncpg
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
    INVALID_VALUE,
    MISSING_REFERENCE,
    RETRY,
    UNAVAILABLE,
)
from scheduling.ports.retry import DATABASE_UNAVAILABLE, FAULT_DETAIL, REFUSING_FAULTS


class ConnectionFault(StrEnum):
    """What went wrong with the connection or the server (never with the statement)."""

    REFUSED = "refused"
    """Nothing accepted the connection (socket error: refused, reset, unreachable)."""
    CANNOT_CONNECT_NOW = "cannot_connect_now"
    """57P03: the server is starting up, shutting down or in recovery."""
    TOO_MANY_CLIENTS = "too_many_clients"
    """53300: no connection slot is left (server, database or role limit)."""
    TERMINATED = "terminated"
    """57P01: the backend was terminated (pg_terminate_backend, smart/fast shutdown)."""
    CRASH = "crash"
    """57P02: another backend crashed and the server reinitializes."""
    CONNECTION = "connection"
    """Any other SQLSTATE of class 08 (connection exception)."""
    INTERFACE = "interface"
    """The driver's own state error with no SQLSTATE: the connection is closed or was
    left mid-protocol ("another operation is in progress")."""


# Specific SQLSTATEs before their classes; 53 and 57 have other members that are not
# about the connection (53100 disk full, 57014 query cancelled).
_BY_FAULT_SQLSTATE: dict[str, ConnectionFault] = {
    "57P03": ConnectionFault.CANNOT_CONNECT_NOW,
    "53300": ConnectionFault.TOO_MANY_CLIENTS,
    "57P01": ConnectionFault.TERMINATED,
    "57P02": ConnectionFault.CRASH,
    "57P05": ConnectionFault.TERMINATED,  # idle_session_timeout
}
_REFUSING = frozenset(ConnectionFault(kind) for kind in REFUSING_FAULTS)
# What the driver raises about its own connection state, without a SQLSTATE.
_INTERFACE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
)


CONNECT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    *_INTERFACE_ERRORS,
    OSError,
)
"""What opening a connection raises unwrapped (SQLAlchemy's asyncpg dialect does not
wrap a connect's errors in its DB-API types): the server's refusal, the driver's own
state errors, a socket error."""

ENGINE_ERRORS: tuple[type[BaseException], ...] = (DBAPIError, *CONNECT_ERRORS)
"""What a SQLAlchemy engine raises talking to the server: a statement's error wrapped in
the DB-API types, or a connect's unwrapped (``CONNECT_ERRORS``); ``translate`` turns each
into the domain's coded error."""


def classify(exc: BaseException) -> ConnectionFault | None:
    """The connection fault behind ``exc`` (raw or wrapped by SQLAlchemy), or ``None``
    when ``exc`` is about the statement or not a driver error at all."""
    for candidate in _chain(exc):
        if isinstance(candidate, OSError):
            return ConnectionFault.REFUSED
        state = _sqlstate(candidate)
        if state is not None:
            if state in _BY_FAULT_SQLSTATE:
                return _BY_FAULT_SQLSTATE[state]
            if state.startswith("08"):
                return ConnectionFault.CONNECTION
            if state in ("53000", "57000"):  # the class codes themselves
                return ConnectionFault.CONNECTION
            return None
        if isinstance(candidate, _INTERFACE_ERRORS):
            return ConnectionFault.INTERFACE
    if isinstance(exc, DBAPIError) and (
        exc.connection_invalidated or type(exc).__name__ == "InterfaceError"
    ):
        return ConnectionFault.INTERFACE
    return None


def refusing(fault: ConnectionFault | None) -> bool:
    """True when the server refused to serve (connect-time): worth waiting out."""
    return fault in _REFUSING


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, then SQLAlchemy's DB-API error, then the driver's own (in that order)."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(out) < 4 and current not in out:
        out.append(current)
        nxt = getattr(current, "orig", None)
        if not isinstance(nxt, BaseException):
            nxt = current.__cause__
        current = nxt
    # The driver's exception is the innermost; it decides first.
    return out[::-1]


def _sqlstate(candidate: BaseException) -> str | None:
    state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
    return state if isinstance(state, str) else None


DATA_EXCEPTION = "22"
"""SQLSTATE class of a value the database cannot hold (22003 numeric out of range,
22008 datetime overflow, 22P02 malformed text, 22021 a NUL byte...)."""

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
    """The driver's own exception: SQLAlchemy's ``orig`` (or the asyncpg error behind
    its adapter), or ``exc`` itself when it is a raw driver error (a connect raises
    asyncpg's exceptions unwrapped)."""
    orig = getattr(exc, "orig", None)
    if orig is None:
        return exc if isinstance(exc, (asyncpg.PostgresError, *_INTERFACE_ERRORS)) else None
    return getattr(orig, "__cause__", None) or orig


def sqlstate_of(exc: BaseException) -> str | None:
    """The SQLSTATE of a driver error (wrapped by SQLAlchemy or raw), if any."""
    driver = _driver_error(exc)
    for candidate in (driver, getattr(exc, "orig", None)):
        state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(state, str):
            return state
    return None


def translate(exc: BaseException, *, connecting: bool = False) -> SchedulingError:
    """The domain error for a driver error (the original is kept as ``__cause__``).

    A connection fault (``classify``) is an ``UnavailableError`` naming its kind in
    ``details["fault"]``: ``DATABASE_UNAVAILABLE`` when the server refused to serve,
    or when ``connecting`` (the unit of work was being opened, so nothing was sent),
    else ``UNAVAILABLE``."""
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
    if state is not None and state[:2] == DATA_EXCEPTION:
        # The same value fails the same way every time: nothing to wait out or retry.
        return ValidationError(INVALID_VALUE, f"database cannot hold a value ({state})", details)
    fault = classify(exc)
    if fault is not None:
        details[FAULT_DETAIL] = fault.value
        if refusing(fault) or connecting:
            return UnavailableError(
                DATABASE_UNAVAILABLE, f"the database cannot serve now ({fault.value})", details
            )
        return UnavailableError(
            UNAVAILABLE, f"the database is unavailable ({fault.value})", details
        )
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
    if isinstance(exc, OSError) or classify(exc) is not None:
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    state = sqlstate_of(exc)
    return state is None or state[:2] in _BROKEN_CLASSES
