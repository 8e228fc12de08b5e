"""Cursors an edge hands to a client, sealed (ADR 2103): AES-256-GCM under a deployment
key, with the listing's kind and the caller's tenant and principal as associated data,
so the token reveals nothing of the keyset (``paging.encode_cursor``) and only the same
listing of the same principal can open it. A tampered, truncated or foreign cursor
fails with ``schedule.page.invalid_cursor``. Apart from ``paging`` so that what pages
without sealing (every repository) does not load the cryptography bindings."""

from __future__ import annotations

import base64
import binascii
import json
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from scheduling.domain.errors import ValidationError
from scheduling.domain.paging import INVALID_CURSOR

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
