"""A seeded ``scheduling.ports.IdGenerator``: identifiers are a function of the seed."""

from __future__ import annotations

import hashlib
import random
from uuid import UUID


class SeededIds:
    """Version-4-shaped UUIDs drawn from ``random.Random(seed)``.

    Each simulated task gets its own ``fork(name)``, so ids do not depend on the order
    in which concurrently running tasks happen to ask. Never repeats within a stream;
    distinct forks collide only with probability 2**-122.
    """

    def __init__(self, seed: int | str) -> None:
        self._seed = str(seed)
        material = hashlib.sha256(self._seed.encode("utf-8")).digest()
        self._random = random.Random(int.from_bytes(material, "big"))
        self._issued: set[UUID] = set()

    def new_uuid(self) -> UUID:
        while True:
            value = UUID(int=self._random.getrandbits(128), version=4)
            if value not in self._issued:
                self._issued.add(value)
                return value

    def fork(self, name: str) -> SeededIds:
        """An independent stream derived from this seed and ``name``."""
        return SeededIds(f"{self._seed}/{name}")
