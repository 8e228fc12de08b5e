"""The names of a deployment's roles: the group roles a prefix gives and the kinds a
login may join. Light on purpose (no database stack): ``logins --help`` lists the
kinds."""

from __future__ import annotations

from scheduling.adapters.postgres.roles import DEFAULT_ROLE_PREFIX, ROLE_KINDS, role_names

__all__ = ["DEFAULT_ROLE_PREFIX", "ROLE_KINDS", "role_names"]
