"""Creating and rotating the LOGIN users of a deployment's group roles
(``scheduling logins``): the password reaches the server only as a SCRAM verifier."""

from __future__ import annotations

from scheduling.adapters.postgres.logins import create_login, generate_password, rotate_password

__all__ = ["create_login", "generate_password", "rotate_password"]
