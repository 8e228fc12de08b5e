"""Bounded memos of pure functions of values the database returned (ADR 2580, 2620).

Shared by the decision store (a schedule firing again) and the point read (the same
schedule read again): both rebuild an immutable revision from its stored definition.
A list page decodes each row's cadence from its JSON text through ``cadence_of``.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

from scheduling.domain.revision import ScheduleRevision
from scheduling.ports.directories import authority_version


class Memo:
    """A bounded memo of a pure function of values the database returned (ADR 2580).

    An entry is used only when its inputs equal the row's *exactly* (``same``: types
    too, so a JSON ``1`` is not ``1.0`` or ``true``, whose canonical texts differ), so
    a hit returns what the call would have built; a changed row misses and replaces
    the entry. The result must be immutable (frozen models, strings): it is shared.
    The stored inputs are the row's own decoded JSON, which nothing mutates. Full:
    cleared, not evicted one by one (a worker's working set is far below the size)."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int) -> None:
        self._entries: dict[Any, tuple[Any, Any]] = {}
        self._size = size

    def get(self, key: Any, inputs: Any) -> Any:
        hit = self._entries.get(key)
        if hit is not None and same(hit[0], inputs):
            return hit[1]
        return None

    def put(self, key: Any, inputs: Any, value: Any) -> None:
        if len(self._entries) >= self._size:
            self._entries.clear()
        self._entries[key] = (inputs, value)


EXACT_TYPES = (str, int, bool, type(None))


def same(a: Any, b: Any) -> bool:
    """JSON values equal with their types: ``==`` alone takes ``1 == 1.0 == True``
    and ``0.0 == -0.0``, whose canonical texts (and so hashes) differ."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if kind is list:
        return len(a) == len(b) and all(map(same, a, b))
    if kind in EXACT_TYPES:
        return bool(a == b)
    return bool(a == b) and repr(a) == repr(b)


REVISIONS = Memo(1024)
"""(schedule, revision, author, created_at) -> the revision its definition rebuilds:
a revision is immutable, so a schedule firing again, or read again, skips
``from_definition``."""


def revision_of(
    schedule_id: UUID, revision: int, author: str, created_at: datetime, definition: Any
) -> ScheduleRevision:
    """``ScheduleRevision.from_definition`` of a stored revision row, memoized: a hit
    needs the same key and a definition equal to the stored one with its JSON types."""
    key = (schedule_id, revision, author, created_at)
    built: ScheduleRevision | None = REVISIONS.get(key, definition)
    if built is None:
        built = ScheduleRevision.from_definition(
            schedule_id, revision, author, created_at, definition
        )
        REVISIONS.put(key, definition, built)
    return built


@lru_cache(maxsize=4096)
def _decoded(text: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    # A pure function of the text, so a plain LRU suffices (no ``same`` check); its
    # value is shared and never handed out (``cadence_of`` copies it). Beside it, the
    # keys whose values are lists: the only values a copy must copy too.
    decoded: dict[str, Any] = json.loads(text)
    return decoded, tuple(k for k, v in decoded.items() if type(v) is list)


def cadence_of(text: str) -> dict[str, Any]:
    """The cadence a list row's JSON text holds (``json.loads``, memoized by the text:
    about 4 us a row decoded; ADR 2620). A fresh dict each call, its lists copied too,
    so no caller can change what the next one gets. The copy is ``dict.copy`` and one
    ``list`` per list value (most cadences have none): 0.2 us against 1 us for a
    comprehension over every value (ADR 2650)."""
    decoded, lists = _decoded(text)
    copy = decoded.copy()
    for key in lists:
        copy[key] = list(copy[key])
    return copy


AUTHORITY_VERSIONS = Memo(4096)
"""(tenant, principal, enabled, scopes) + authority inputs -> the authority version
(a canonical JSON and sha256 otherwise: per decision, and per request at the edge)."""


def authority_version_of(
    tenant_id: str, principal_id: str, enabled: bool, scopes: frozenset[str], inputs: Any
) -> str:
    """``authority_version`` of a principal row, memoized: a hit needs the same key and
    authority inputs equal with their JSON types."""
    key = (tenant_id, principal_id, enabled, scopes)
    version: str | None = AUTHORITY_VERSIONS.get(key, inputs)
    if version is None:
        version = authority_version(tenant_id, principal_id, enabled, scopes, inputs)
        AUTHORITY_VERSIONS.put(key, inputs, version)
    return version
