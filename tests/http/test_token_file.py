"""The bearer-token file stores digests only, authenticates in constant time per entry,
re-reads itself after a change, and fails closed on a broken file."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduling.adapters.token_file import (
    TOKEN_FILE_INVALID,
    TOKEN_UNKNOWN,
    TokenFile,
    digest_of,
    issue_token,
    read_entries,
    revoke_token,
)
from scheduling.domain.errors import ValidationError

AT = datetime(2026, 12, 1, 10, tzinfo=UTC)


def test_file_holds_the_digest_never_the_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    entry, token = issue_token(path, "acme", "alice", AT)
    text = path.read_text()
    assert token not in text
    assert token.split("_")[-1] not in text
    assert entry.digest == digest_of(token)
    assert entry.digest in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) > 40


def test_authenticate_revoke_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    entry, token = issue_token(path, "acme", "alice", AT)
    _, other = issue_token(path, "acme", "bob", AT)
    directory = TokenFile(path)
    who = directory.authenticate(token)
    assert who is not None
    assert (who.tenant_id, who.principal_id, who.token_id) == ("acme", "alice", entry.token_id)
    assert directory.authenticate(token + "x") is None
    assert directory.authenticate("") is None
    revoke_token(path, entry.token_id)
    assert directory.authenticate(token) is None  # re-read without a restart
    bob = directory.authenticate(other)
    assert bob is not None
    assert bob.principal_id == "bob"
    with pytest.raises(ValidationError) as unknown:
        revoke_token(path, entry.token_id)
    assert unknown.value.code == TOKEN_UNKNOWN


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[" * 5000 + "]" * 5000,  # nested past the parser's own limit
        json.dumps({"format": "other", "tokens": []}),
        json.dumps({"format": "scheduling.tokens/1", "tokens": [{"id": "tok_1"}]}),
        json.dumps({"format": "scheduling.tokens/1", "tokens": [], "extra": 1}),
    ],
)
def test_broken_file_is_refused_and_authenticates_nobody(tmp_path: Path, document: str) -> None:
    path = tmp_path / "tokens.json"
    _, token = issue_token(path, "acme", "alice", AT)
    directory = TokenFile(path)
    path.write_text(document)
    with pytest.raises(ValidationError) as refused:
        read_entries(path)
    assert refused.value.code == TOKEN_FILE_INVALID
    assert directory.authenticate(token) is None


def test_a_file_that_is_not_utf8_is_refused_and_authenticates_nobody(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    _, token = issue_token(path, "acme", "alice", AT)
    directory = TokenFile(path)
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(ValidationError) as refused:
        read_entries(path)
    assert refused.value.code == TOKEN_FILE_INVALID
    assert directory.authenticate(token) is None
