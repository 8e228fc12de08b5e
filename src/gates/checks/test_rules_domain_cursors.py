"""gate.schedule.model_lifecycle_discovery: schedule.list "paginates by opaque cursor".
The cursor handed to the model is the service's keyset sealed with AES-256-GCM
(ADR 2103: ``version(1) || nonce(12) || ciphertext+tag``, the nonce random).

* Opaque means nothing is learnt by comparing cursors: the same page listed twice
  gives two different cursors, and no two cursors share a nonce (a fixed or repeated
  GCM nonce makes equal positions equal tokens, and the XOR of two tokens the XOR of
  their keysets; mutant ``domain.cursor_nonce_fixed``).
* Only the issued token opens: one byte changed in any part of it - the version byte
  (ADR 2103: "another version byte" is refused; mutant
  ``domain.cursor_version_unchecked``), the nonce, the ciphertext or the tag - is the
  stable ``schedule.page.invalid_cursor`` with no items, while the untouched token
  pages on.
"""

from __future__ import annotations

import base64

import pytest

from gates.checks.tool_checks import definition_for
from gates.checks.tool_support import WHO, ToolWorld

pytestmark = pytest.mark.postgres

INVALID_CURSOR = "schedule.page.invalid_cursor"
NONCE = slice(1, 13)
DAILY = {"kind": "DAILY", "local_time": "09:00", "timezone": "Europe/Paris"}


def token_bytes(cursor: str) -> bytes:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def cursor_of(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def flipped(cursor: str, index: int) -> str:
    raw = bytearray(token_bytes(cursor))
    raw[index] ^= 0x01
    return cursor_of(bytes(raw))


@pytest.mark.gate("gate.schedule.model_lifecycle_discovery")
async def test_list_cursors_are_fresh_and_every_byte_is_sealed(pg_url: str) -> None:
    world = await ToolWorld.open(pg_url)
    try:
        for i in range(4):
            await world.service.create(WHO, f"seal-{i}", definition_for(f"S{i}", "x", DAILY))
            world.clock.advance(1)
        calls = iter(range(1000))

        async def listed(args: dict[str, object]) -> tuple[list[str], str | None, str | None]:
            result = await world.call("schedule.list", args, f"seal-list-{next(calls)}")
            items = [] if result.output is None else result.output.get("items") or []
            nxt = None if result.output is None else result.output.get("next_cursor")
            return [i["schedule_id"] for i in items], nxt, None if result.ok else result.reason_code

        first_ids, first, _ = await listed({"limit": 1})
        again_ids, again, _ = await listed({"limit": 1})
        assert first is not None
        assert again is not None
        assert first_ids == again_ids
        assert first != again, "the same page listed twice gave the same cursor"
        cursors = [first, again]
        following: str | None = first
        pages = [first_ids]
        while following is not None:
            ids, following, code = await listed({"limit": 1, "cursor": following})
            assert code is None, code
            pages.append(ids)
            if following is not None:
                cursors.append(following)
        assert sorted(i for p in pages for i in p) == sorted({i for p in pages for i in p})
        assert len(pages) == 4, pages
        nonces = [token_bytes(c)[NONCE] for c in cursors]
        assert len(set(nonces)) == len(nonces), "two cursors share a nonce"
        raw = token_bytes(first)
        positions = {
            "version": 0,
            "nonce": 5,
            "ciphertext": 13,
            "tag": len(raw) - 1,
        }
        refused = {}
        for part, index in positions.items():
            ids, _, code = await listed({"limit": 1, "cursor": flipped(first, index)})
            refused[part] = (code, ids)
        assert refused == {part: (INVALID_CURSOR, []) for part in positions}, refused
        ids, _, code = await listed({"limit": 1, "cursor": first})
        assert code is None, code
        assert ids == pages[1], (ids, pages)
    finally:
        await world.close()
