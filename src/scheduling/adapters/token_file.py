"""The local bearer-token file: token digests only (ADR 1501).

Format (JSON, one object)::

    {"format": "scheduling.tokens/1",
     "tokens": [{"id": "tok_3f9a...", "tenant_id": "acme", "principal_id": "alice",
                 "digest": "sha256:<64 hex>", "created_at": "2026-12-01T10:00:00Z",
                 "name": "ci"}]}

``name`` is optional: the label a batch provisioning file uses to say "this principal
holds a token called ``ci``" without holding its secret (ADR 2260); it is unique per
(tenant, principal).

A token is ``sch_<id>_<secret>`` with 256 bits of randomness in ``secret``; the file keeps
``sha256(token)`` only, so a leaked file grants nothing. ``authenticate`` hashes the
presented value and compares it with every digest through ``hmac.compare_digest``
(no early exit on the first match). The file is re-read when its size or mtime
changes, so ``scheduling tokens revoke`` takes effect without a restart. Writes go to a
temporary file in the same directory and are renamed into place (mode 0600).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.ports.tokens import TokenIdentity

FORMAT = "scheduling.tokens/1"
TOKEN_FILE_INVALID = reason(
    "schedule.tokens.file_invalid", "The token file is not a valid scheduling.tokens/1 document"
)
TOKEN_UNKNOWN = reason("schedule.tokens.unknown", "No token with this id is in the token file")
TOKEN_IDENTITY_INVALID = reason(
    "schedule.tokens.identity_invalid",
    "A token needs a non-empty tenant_id and principal_id without whitespace",
)

TOKEN_NAME_TAKEN = reason(
    "schedule.tokens.name_taken",
    "The principal already holds a token with this name (revoke it first to replace it)",
)

_ID = re.compile(r"^tok_[0-9a-f]{16}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_NAME = re.compile(r"^\S{1,200}$")


def digest_of(token: str) -> str:
    """The stored form of a token."""
    return "sha256:" + hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    token_id: str
    tenant_id: str
    principal_id: str
    digest: str
    created_at: str
    name: str | None = None

    def to_json(self) -> dict[str, str]:
        document = {
            "id": self.token_id,
            "tenant_id": self.tenant_id,
            "principal_id": self.principal_id,
            "digest": self.digest,
            "created_at": self.created_at,
        }
        if self.name is not None:
            document["name"] = self.name
        return document


def _invalid(why: str) -> ValidationError:
    return ValidationError(TOKEN_FILE_INVALID, f"token file: {why}")


def parse_entries(document: Any) -> list[TokenEntry]:
    """The entries of a parsed token document; raises ``TOKEN_FILE_INVALID``."""
    if not isinstance(document, dict) or set(document) != {"format", "tokens"}:
        raise _invalid("expected an object with exactly 'format' and 'tokens'")
    if document["format"] != FORMAT:
        raise _invalid(f"format must be {FORMAT!r}")
    if not isinstance(document["tokens"], list):
        raise _invalid("'tokens' must be a list")
    entries: list[TokenEntry] = []
    seen: set[str] = set()
    names: set[tuple[str, str, str | None]] = set()
    for n, raw in enumerate(document["tokens"]):
        keys = {"id", "tenant_id", "principal_id", "digest", "created_at"}
        if not isinstance(raw, dict) or not keys <= set(raw) <= keys | {"name"}:
            raise _invalid(f"token #{n} must have exactly {sorted(keys)} (and maybe 'name')")
        if not all(isinstance(raw[k], str) for k in raw):
            raise _invalid(f"token #{n}: every field is a string")
        name = raw.get("name")
        if name is not None and not _NAME.match(name):
            raise _invalid(f"token #{n}: name is a non-empty name")
        if name is not None and (raw["tenant_id"], raw["principal_id"], name) in names:
            raise _invalid(f"token #{n}: duplicate name {name!r} for its principal")
        names.add((raw["tenant_id"], raw["principal_id"], name))
        if not _ID.match(raw["id"]) or not _DIGEST.match(raw["digest"]):
            raise _invalid(f"token #{n}: malformed id or digest")
        if not (_NAME.match(raw["tenant_id"]) and _NAME.match(raw["principal_id"])):
            raise _invalid(f"token #{n}: tenant_id and principal_id are non-empty names")
        if raw["id"] in seen:
            raise _invalid(f"token #{n}: duplicate id {raw['id']}")
        seen.add(raw["id"])
        entries.append(
            TokenEntry(
                raw["id"],
                raw["tenant_id"],
                raw["principal_id"],
                raw["digest"],
                raw["created_at"],
                name,
            )
        )
    return entries


def read_entries(path: Path) -> list[TokenEntry]:
    """The entries of the file at ``path`` (a missing file has none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise _invalid("not UTF-8 text") from None
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # nested past the parser's limit too
        raise _invalid("not JSON") from None
    return parse_entries(document)


def write_entries(path: Path, entries: list[TokenEntry]) -> None:
    """Atomically replace the file with ``entries`` (mode 0600)."""
    document = {"format": FORMAT, "tokens": [e.to_json() for e in entries]}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tokens-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(document, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def issue_token(
    path: Path, tenant_id: str, principal_id: str, at: datetime, *, name: str | None = None
) -> tuple[TokenEntry, str]:
    """Add a new token for (tenant, principal); returns its entry and the token text,
    which exists only in the return value (the file keeps its digest). A ``name`` the
    principal's tokens already use is ``TOKEN_NAME_TAKEN``."""
    if not (_NAME.match(tenant_id) and _NAME.match(principal_id)):
        raise ValidationError(TOKEN_IDENTITY_INVALID, "tenant_id and principal_id are names")
    if name is not None and not _NAME.match(name):
        raise ValidationError(TOKEN_IDENTITY_INVALID, "a token name is a non-empty name")
    entries = read_entries(path)
    if name is not None and any(
        (e.tenant_id, e.principal_id, e.name) == (tenant_id, principal_id, name) for e in entries
    ):
        raise ValidationError(
            TOKEN_NAME_TAKEN, f"{tenant_id}/{principal_id} already holds a token named {name!r}"
        )
    token_id = "tok_" + secrets.token_hex(8)
    token = f"sch_{token_id[4:]}_{secrets.token_urlsafe(32)}"
    entry = TokenEntry(token_id, tenant_id, principal_id, digest_of(token), at.isoformat(), name)
    write_entries(path, [*entries, entry])
    return entry, token


def revoke_token(path: Path, token_id: str) -> TokenEntry:
    """Remove the token ``token_id``; raises ``TOKEN_UNKNOWN`` when it is absent."""
    entries = read_entries(path)
    kept = [e for e in entries if e.token_id != token_id]
    if len(kept) == len(entries):
        raise ValidationError(TOKEN_UNKNOWN, "no such token id", {"token_id": token_id})
    write_entries(path, kept)
    return next(e for e in entries if e.token_id == token_id)


class TokenFile:
    """``TokenDirectory`` over the token file; re-reads it when it changes on disk."""

    def __init__(self, path: Path) -> None:
        self._path = path
        # Stat'ed on every request (a revoke takes effect without a restart): by its
        # text, which skips pathlib's per-call conversion of the Path.
        self._fspath = os.fspath(path)
        self._stamp: tuple[int, int, int] | None = None
        self._entries: list[TokenEntry] = []
        self._refresh()

    @property
    def path(self) -> Path:
        return self._path

    def _refresh(self) -> None:
        try:
            st = os.stat(self._fspath)
        except FileNotFoundError:
            self._stamp, self._entries = None, []
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp != self._stamp:
            self._entries = read_entries(self._path)
            self._stamp = stamp

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, presented: str) -> TokenIdentity | None:
        try:
            self._refresh()
        except ValidationError:
            return None  # a broken file authenticates nobody (fail closed)
        offered = digest_of(presented).encode()
        found: TokenEntry | None = None
        for entry in self._entries:
            # Compare with every entry; never stop at the first match.
            if hmac.compare_digest(offered, entry.digest.encode()) and found is None:
                found = entry
        if found is None:
            return None
        return TokenIdentity(found.token_id, found.tenant_id, found.principal_id)
