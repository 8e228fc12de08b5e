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

    def __post_init__(self) -> None:
        if (
            self.attempts < 0
            or not 0 < self.base_delay_seconds < float("inf")
            or not self.base_delay_seconds <= self.max_delay_seconds < float("inf")
        ):
            raise ValidationError(
                RETRY_INVALID, "need attempts >= 0 and 0 < base_delay <= max_delay < inf"
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
    if isinstance(exc, UnavailableError) and exc.code == UNAVAILABLE:
        state = exc.details.get("sqlstate")
        # No SQLSTATE: a protocol-level failure (closed connection, "another operation
        # is in progress"): the connection was discarded, a new one will do.
        return state is None or str(state)[:2] in TRANSIENT_SQLSTATE_CLASSES
    return False


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
        while True:
            try:
                return await operation()
            except Exception as exc:
                retryable = is_transient(exc) and (idempotent or not commit_outcome_unknown(exc))
                if not retryable or attempt >= self.settings.attempts:
                    raise
                delay = self.settings.delay(attempt, self.jitter)
                _log.warning(
                    "%s: transient %s (%s); retry %d/%d in %.3fs",
                    what,
                    type(exc).__name__,
                    getattr(exc, "code", ""),
                    attempt + 1,
                    self.settings.attempts,
                    delay,
                )
                attempt += 1
                self.retried += 1
                await self.clock.sleep(delay)
