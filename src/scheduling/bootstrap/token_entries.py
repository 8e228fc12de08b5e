"""The token file as the ``tokens`` and ``provision`` commands reach it: issue, revoke
and read its entries. Apart from ``provisioning`` so that ``tokens list`` and ``tokens
revoke``, which only read or rewrite the file, load no database stack (ADR 2751)."""

from __future__ import annotations

from scheduling.adapters.token_file import TokenEntry, issue_token, read_entries, revoke_token

__all__ = ["TokenEntry", "issue_token", "read_entries", "revoke_token"]
