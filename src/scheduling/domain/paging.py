"""Keyset pagination with opaque cursors.

A keyset cursor (``encode_cursor``) is the URL-safe base64 of a small JSON array
holding the sort key of the last item returned. An edge that hands a cursor to a
client seals it first (``seal_cursor``, ADR 2103): AES-256-GCM under a deployment key,
with the listing's kind and the caller's tenant and principal as associated data, so
the token reveals nothing of the keyset and only the same listing of the same
principal can open it. A tampered, truncated or foreign cursor fails with
``schedule.page.invalid_cursor`` rather than returning wrong rows.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

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


_SEAL_VERSION = b"\x01"
_NONCE_BYTES = 12


def _binding(kind: str, tenant_id: str, principal_id: str) -> bytes:
    return json.dumps([kind, tenant_id, principal_id], separators=(",", ":")).encode()


def seal_cursor(key: bytes, kind: str, tenant_id: str, principal_id: str, inner: str) -> str:
    """``inner`` (a keyset cursor) sealed for listing ``kind`` of one principal: the
    URL-safe base64 of version, random nonce and AES-256-GCM ciphertext with tag."""
    nonce = secrets.token_bytes(_NONCE_BYTES)
    sealed = AESGCM(key).encrypt(
        nonce, inner.encode("utf-8"), _binding(kind, tenant_id, principal_id)
    )
    token = _SEAL_VERSION + nonce + sealed
    return base64.urlsafe_b64encode(token).decode().rstrip("=")


def open_cursor(key: bytes, kind: str, tenant_id: str, principal_id: str, cursor: str) -> str:
    """The keyset cursor inside a ``seal_cursor`` token of this listing and principal;
    ``INVALID_CURSOR`` for anything else (tampered, truncated, foreign, another key)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        token = base64.urlsafe_b64decode(padded.encode("ascii"))
        if len(token) < 1 + _NONCE_BYTES + 16 or token[:1] != _SEAL_VERSION:
            raise ValueError("not a sealed cursor")
        nonce, sealed = token[1 : 1 + _NONCE_BYTES], token[1 + _NONCE_BYTES :]
        inner = AESGCM(key).decrypt(nonce, sealed, _binding(kind, tenant_id, principal_id))
        return inner.decode("utf-8")
    except (ValueError, binascii.Error, UnicodeError, InvalidTag):
        raise ValidationError(INVALID_CURSOR, "the page cursor is not valid") from None
