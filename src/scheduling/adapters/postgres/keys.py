"""The PostgreSQL key ring: the ``deployment_keys`` rows revision 0008 seeds.

The API role may only SELECT the table (ADR 2100): the migration seeds one random key
per purpose, so every API instance of the deployment reads the same bytes. A key is
read once per process and purpose and then served from memory.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from scheduling.adapters.postgres.tables import deployment_keys
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.domain.errors import UnavailableError
from scheduling.ports.keys import KEY_BYTES, KEY_MISSING, KeyRing


class PostgresKeyRing:
    """See ``scheduling.ports.keys.KeyRing``."""

    def __init__(self, uow: PostgresUnitOfWorkFactory) -> None:
        self._uow = uow
        self._keys: dict[str, bytes] = {}
        self._lock = asyncio.Lock()

    async def key(self, purpose: str) -> bytes:
        cached = self._keys.get(purpose)
        if cached is not None:
            return cached
        async with self._lock:
            cached = self._keys.get(purpose)
            if cached is not None:
                return cached
            statement = select(deployment_keys.c.key).where(deployment_keys.c.purpose == purpose)
            async with self._uow.begin() as uow:
                row = (await uow.tx.execute(statement)).first()
            if row is None or len(bytes(row[0])) != KEY_BYTES:
                raise UnavailableError(KEY_MISSING, f"no deployment key for purpose {purpose!r}")
            key = self._keys[purpose] = bytes(row[0])
            return key


def _conforms(ring: PostgresKeyRing) -> KeyRing:
    """Static proof (mypy) that the adapter implements the port."""
    return ring
