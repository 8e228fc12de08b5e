"""Values every role derives from ``Settings`` the same way: role names, logins, tenant
ceilings, the run capacity, the retry policy, the jitter seed, retention."""

from __future__ import annotations

import random

from scheduling.adapters.memory.directories import ConfiguredTenantConfiguration
from scheduling.adapters.postgres.roles import DEFAULT_ROLE_PREFIX, RoleNames, role_names
from scheduling.bootstrap.refusals import RETRY_SETTINGS, WORKER_TOPOLOGY
from scheduling.config import Settings
from scheduling.domain.errors import ValidationError
from scheduling.domain.tenancy import TenantCeilings
from scheduling.ports.ids import IdGenerator
from scheduling.ports.retry import JitterSource, RetrySettings
from scheduling.ports.runtime import QueueCapacity
from scheduling.service.maintenance import RetentionSettings


def prefixed_roles(prefix: str | None) -> RoleNames:
    return role_names(prefix or DEFAULT_ROLE_PREFIX)


def role_login(
    own_url: str | None, fallback_url: str | None, role: str
) -> tuple[str | None, str | None]:
    """(url, assume_role): the role's own login, else SET LOCAL ROLE over the fallback."""
    if own_url:
        return own_url, None
    return fallback_url, role if fallback_url else None


def tenant_ceilings(settings: Settings) -> ConfiguredTenantConfiguration:
    ceilings: TenantCeilings | None = settings.ceilings.to_ceilings()
    return ConfiguredTenantConfiguration(default=ceilings)


def configured_capacity(settings: Settings) -> QueueCapacity | str:
    t = settings.topology
    try:
        return QueueCapacity(t.total_slots, t.interactive_reserved_slots, t.async_reserved_slots)
    except ValidationError as exc:
        return f"{WORKER_TOPOLOGY}: {exc.message}"


RetryValues = tuple[int, float, float, float]
"""``RetrySettings``' fields in order: attempts, base and max delay, outage seconds."""


def retry_values(settings: Settings) -> RetryValues:
    return (
        settings.transient_retry_attempts,
        settings.transient_retry_base_seconds,
        settings.transient_retry_max_seconds,
        settings.transient_retry_outage_seconds,
    )


def retry_settings(values: RetryValues) -> RetrySettings | str:
    """The retry settings, or the problem that refuses startup."""
    try:
        return RetrySettings(*values)
    except ValidationError as exc:
        return f"{RETRY_SETTINGS}: {exc.message}"


def seeded_jitter(ids: IdGenerator) -> JitterSource:
    """A jitter source seeded from the id generator (random ids in production, seeded
    ids in the simulator): never ambient randomness."""
    return random.Random(ids.new_uuid().int)


def retention_settings(settings: Settings) -> RetentionSettings:
    return RetentionSettings(
        terminal_retention_days=settings.terminal_retention_days,
        purge_interval_seconds=settings.purge_interval_seconds,
        terminal_purge_batch=settings.terminal_purge_batch,
    )
