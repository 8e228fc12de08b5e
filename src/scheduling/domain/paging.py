"""Keyset pagination with opaque cursors.

A keyset cursor (``encode_cursor``) is the URL-safe base64 of a small JSON array
holding the sort key of the last item returned. An edge that hands a cursor to a
client seals it first (``sealed_cursors``, ADR 2103), so the token reveals nothing of
the keyset and only the same listing of the same principal can open it. A tampered,
truncated or foreign cursor fails with ``schedule.page.invalid_cursor`` rather than
returning wrong rows.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Generic, TypeVar

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason

INVALID_CURSOR = reason("schedule.page.invalid_cursor", "The page cursor is malformed or foreign")
INVALID_LIMIT = reason("schedule.page.invalid_limit", "The page size is outside 1..MAX_PAGE_SIZE")

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50

T = TypeVar("T")


@dataclass(frozen=True)
class PageRequest:
    """Ask for at most ``limit`` items after ``cursor`` (``None``: the first page)."""

    limit: int = DEFAULT_PAGE_SIZE
    cursor: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_PAGE_SIZE:
            raise ValidationError(
                INVALID_LIMIT, f"page size must be 1..{MAX_PAGE_SIZE}", {"limit": self.limit}
            )


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results; ``next_cursor`` is ``None`` on the last page."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None


def encode_cursor(kind: str, key: Sequence[str]) -> str:
    """An opaque cursor for a sort ``key`` of a listing named ``kind``."""
    raw = json.dumps([kind, *key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str, width: int) -> list[str]:
    """The sort key inside ``cursor``; raises ``INVALID_CURSOR`` for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
    if (
        not isinstance(data, list)
        or len(data) != width + 1
        or data[0] != kind
        or not all(isinstance(part, str) for part in data)
    ):
        raise ValidationError(INVALID_CURSOR, "the page cursor is not valid")
    return [str(part) for part in data[1:]]


def cursor_instant(text: str) -> datetime:
    """The UTC instant a cursor's part names; raises ``INVALID_CURSOR`` for anything but
    an instant with an offset that UTC can hold (``0001-01-01T00:00:00+14:00`` parses,
    then overflows in the driver: a client's edited cursor, never a server fault)."""
    try:
        instant = datetime.fromisoformat(text)
        if instant.tzinfo is None:
            raise ValueError("no offset")
        return instant.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
