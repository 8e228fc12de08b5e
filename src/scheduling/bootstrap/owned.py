"""The one ``close`` of a role over one storage: a storage the caller injected is the
caller's to close (ADR 2171), one the builder opened is the role's."""

from __future__ import annotations

from scheduling.storage import Storage


class OwnedStorage:
    """Base of a role dataclass that declares ``storage`` and ``owns_storage`` fields
    (declared here for the type checker only: the dataclass keeps its own field order)."""

    storage: Storage
    owns_storage: bool

    async def close(self) -> None:
        if self.owns_storage:
            await self.storage.close()
