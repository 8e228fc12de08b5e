"""What the provisioning commands (``principals``/``agents import``, ``tokens add``,
``provision``) reach: the provisioning service over one connection of the trusted
login (the token file is ``token_entries``). Imported when a command first asks for one
of these names, so those commands' ``--help`` imports neither the database stack nor
the domain (ADR 2750)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.ports.clock import Clock
from scheduling.service.provisioning import (
    FILE_INVALID,
    INPUT_MISSING,
    ProvisioningService,
    TokenName,
)

__all__ = ["FILE_INVALID", "INPUT_MISSING", "TokenName", "open_provisioning"]


@asynccontextmanager
async def open_provisioning(url: str, clock: Clock) -> AsyncIterator[ProvisioningService]:
    """The provisioning service over a pool of one connection of the trusted login at
    ``url``, disposed on leaving."""
    uow = PostgresUnitOfWorkFactory.from_url(url, pool_size=1)
    try:
        yield ProvisioningService(uow, clock)
    finally:
        await uow.dispose()
