"""Prompt, bounded, jittered retry of transient database errors.

A transient error (connection lost, backend terminated, server shutting down or out
of connections, serialization failure, deadlock) says nothing about the definition
being worked on: the same transaction is expected to succeed a moment later. It is
retried a bounded number of times after a short "full jitter" delay
(``uniform(0, min(cap, base * 2**attempt))``), slept on the ``Clock`` so virtual
time drives it in the simulator, with the jitter drawn from an injected seeded
source (never ambient randomness), so a replay draws the same delays.

This is distinct from the isolation backoff of the schedule worker: a definition that
fails deterministically (it does not decode, a constraint refuses it) is not retried
here; it is set aside for ``failure_backoff_seconds`` while its siblings proceed.

``retry_transient`` never retries an error whose COMMIT outcome is unknown
(``details["commit_outcome_unknown"]``) unless the caller says the work is
idempotent on re-execution (the materializer is: a second attempt re-reads the
schedule and finds it advanced or the occurrence present).

A server that refuses to serve (``DATABASE_UNAVAILABLE``: nothing listening, starting
up or shutting down, out of connection slots; the adapter's one classification names
the kind in ``details["fault"]``, ADR 2220) is waited out rather than counted: its
retries go on, each delay capped at ``max_delay_seconds``, until
``outage_seconds`` of Clock time have passed since the first refusal. A restart takes
seconds, not four tries of a tenth of a second. Each retry is one WARNING line with
the classified kind and no traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from scheduling.domain.errors import ConflictError, UnavailableError, ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.clock import Clock
from scheduling.ports.repositories import COMMIT_OUTCOME_UNKNOWN, RETRY, UNAVAILABLE

DATABASE_UNAVAILABLE = reason(
    "schedule.database.unavailable",
    "The database cannot serve now (refusing connections, starting up or shutting down,"
    " or out of connection slots); retry shortly",
)
FAULT_DETAIL = "fault"
"""``details`` key of an unavailable error: the classified connection fault's kind."""
REFUSING_FAULTS = frozenset({"refused", "cannot_connect_now", "too_many_clients"})
"""The kinds for which the server refused to serve (``DATABASE_UNAVAILABLE``)."""

RETRY_INVALID = reason(
    "schedule.retry.invalid_settings",
    "Transient-error retry attempts are negative or its delays are not finite and ordered",
)
# SQLSTATE classes that describe the connection or the server, never the statement:
# 08 connection exception, 57 operator intervention (terminated backend, shutdown),
# 53 insufficient resources (too many connections), 40 transaction rollback.
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "57", "53", "40"})

T = TypeVar("T")
_log = logging.getLogger(__name__)


class JitterSource(Protocol):
    """A seeded uniform source (``random.Random`` satisfies it)."""

    def random(self) -> float:
        """A float in [0, 1)."""
        ...


@dataclass(frozen=True)
class RetrySettings:
    """``attempts`` retries after the first try (0 disables); delays in seconds."""

    attempts: int = 4
    base_delay_seconds: float = 0.1
    max_delay_seconds: float = 2.0
    outage_seconds: float = 30.0
    """How long a refusing server (``DATABASE_UNAVAILABLE``) is waited out, on the
    Clock, from the first refusal (0: refusals count as attempts like any other)."""

    def __post_init__(self) -> None:
        if (
            self.attempts < 0
            or not 0 < self.base_delay_seconds < float("inf")
            or not self.base_delay_seconds <= self.max_delay_seconds < float("inf")
            or not 0 <= self.outage_seconds < float("inf")
        ):
            raise ValidationError(
                RETRY_INVALID,
                "need attempts >= 0, 0 < base_delay <= max_delay < inf and"
                " 0 <= outage_seconds < inf",
            )

    def delay(self, attempt: int, jitter: JitterSource) -> float:
        """The delay before retry number ``attempt`` (0-based): full jitter."""
        ceiling = min(self.max_delay_seconds, self.base_delay_seconds * float(2**attempt))
        return ceiling * jitter.random()

    def worst_case_seconds(self) -> float:
        """The longest all retries can sleep in total."""
        return sum(
            (
                min(self.max_delay_seconds, self.base_delay_seconds * float(2**n))
                for n in range(self.attempts)
            ),
            0.0,
        )


def is_transient(exc: BaseException) -> bool:
    """True for errors about the connection or a serialization conflict, not the work."""
    if isinstance(exc, ConflictError):
        return exc.code == RETRY
    if isinstance(exc, UnavailableError) and exc.code == DATABASE_UNAVAILABLE:
        return True
    if isinstance(exc, UnavailableError) and exc.code == UNAVAILABLE:
        if exc.details.get(FAULT_DETAIL) is not None:
            return True
        state = exc.details.get("sqlstate")
        # No SQLSTATE: a protocol-level failure (closed connection, "another operation
        # is in progress"): the connection was discarded, a new one will do.
        return state is None or str(state)[:2] in TRANSIENT_SQLSTATE_CLASSES
    return False


def refused(exc: BaseException) -> bool:
    """True when the server refused to serve: waited out for ``outage_seconds``."""
    return isinstance(exc, UnavailableError) and exc.code == DATABASE_UNAVAILABLE


def fault_of(exc: BaseException) -> str:
    """The classified kind of a transient error, for a log line ("" when none)."""
    if isinstance(exc, UnavailableError):
        return str(exc.details.get(FAULT_DETAIL) or exc.details.get("sqlstate") or exc.code)
    return str(getattr(exc, "code", "") or type(exc).__name__)


def commit_outcome_unknown(exc: BaseException) -> bool:
    """True when the error hit the COMMIT itself (it may or may not have landed)."""
    return isinstance(exc, UnavailableError) and bool(exc.details.get(COMMIT_OUTCOME_UNKNOWN))


@dataclass
class TransientRetry:
    """Runs an async operation, retrying transient errors per ``settings``."""

    settings: RetrySettings
    clock: Clock
    jitter: JitterSource
    retried: int = 0
    """How many retries this policy has made (a tenant-safe metric)."""

    async def run(
        self,
        operation: Callable[[], Awaitable[T]],
        *,
        what: str,
        idempotent: bool = False,
    ) -> T:
        """``await operation()``; a transient error is retried after a jittered delay,
        at most ``settings.attempts`` times; anything else propagates at once."""
        attempt = 0
        outage_began: float | None = None
        while True:
            try:
                return await operation()
            except Exception as exc:
                retryable = is_transient(exc) and (idempotent or not commit_outcome_unknown(exc))
                if not retryable:
                    raise
                waited = 0.0
                if refused(exc) and self.settings.outage_seconds > 0 and self.settings.attempts > 0:
                    # Waited out on the Clock, not counted: a restart takes seconds.
                    clock_now = self.clock.now().timestamp()
                    outage_began = clock_now if outage_began is None else outage_began
                    waited = clock_now - outage_began
                    delay = self.settings.delay(min(attempt, 30), self.jitter)
                    delay = max(delay, self.settings.base_delay_seconds)
                    if waited + delay > self.settings.outage_seconds:
                        raise
                elif attempt >= self.settings.attempts:
                    raise
                else:
                    delay = self.settings.delay(attempt, self.jitter)
                _log.warning(
                    "%s: transient %s (%s); retry %d in %.3fs",
                    what,
                    type(exc).__name__,
                    fault_of(exc),
                    attempt + 1,
                    delay,
                    extra={"fault": fault_of(exc), "retry": attempt + 1, "waited": waited},
                )
                attempt += 1
                self.retried += 1
                await self.clock.sleep(delay)
