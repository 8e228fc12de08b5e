"""The deployment key ring: one secret key per purpose, stable across a deployment.

Keyed digests and sealed tokens (the tool and HTTP list cursors, idempotency-key
digests) need a key that every instance of one deployment agrees on, without an
operator configuring a secret for each edge. ``key(purpose)`` returns 32 bytes that
are the same for every call, every process and every instance of the deployment
(PostgreSQL: the ``deployment_keys`` table, revision 0008; memory: random per
instance) and differ between purposes. Keys never reach state other than their own
table, nor logs, nor any output.
"""

from __future__ import annotations

from typing import Protocol

from scheduling.domain.reasons import reason

KEY_BYTES = 32

TOOL_CURSOR = "tool.cursor"
HTTP_CURSOR = "http.cursor"
IDEMPOTENCY_KEY = "idempotency.key"
PURPOSES = (TOOL_CURSOR, HTTP_CURSOR, IDEMPOTENCY_KEY)
"""Every purpose the deployment seeds a key for (revision 0008)."""

KEY_MISSING = reason(
    "schedule.keys.missing", "The deployment has no key for this purpose (schema not migrated)"
)


class KeyRing(Protocol):
    """Keys by purpose. Contract: ``len(await key(p)) == 32``; the same bytes for the
    same purpose for the life of the deployment; different purposes, different keys;
    an unknown purpose raises ``UnavailableError`` (``schedule.keys.missing``)."""

    async def key(self, purpose: str) -> bytes: ...
