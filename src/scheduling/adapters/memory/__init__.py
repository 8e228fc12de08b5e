"""In-memory adapters for application and property tests only (never production)."""

from scheduling.adapters.memory.uow import MemoryStore, MemoryUnitOfWork, MemoryUnitOfWorkFactory

__all__ = ["MemoryStore", "MemoryUnitOfWork", "MemoryUnitOfWorkFactory"]
