"""The in-memory key ring: random keys per instance (development, tests)."""

from __future__ import annotations

import secrets

from scheduling.domain.errors import UnavailableError
from scheduling.ports.keys import KEY_BYTES, KEY_MISSING, PURPOSES, KeyRing


class MemoryKeyRing:
    """See ``scheduling.ports.keys.KeyRing``: each purpose gets a fresh random key the
    first time it is asked for, and keeps it for the life of the instance."""

    def __init__(self, purposes: tuple[str, ...] = PURPOSES) -> None:
        self._purposes = frozenset(purposes)
        self._keys: dict[str, bytes] = {}

    async def key(self, purpose: str) -> bytes:
        if purpose not in self._purposes:
            raise UnavailableError(KEY_MISSING, f"no deployment key for purpose {purpose!r}")
        found = self._keys.get(purpose)
        if found is None:
            found = self._keys[purpose] = secrets.token_bytes(KEY_BYTES)
        return found


def _conforms(ring: MemoryKeyRing) -> KeyRing:
    """Static proof (mypy) that the adapter implements the port."""
    return ring
