"""The validation rule: a credential-shaped title or instruction is rejected.

The error names the field and the detector kinds only, never the value or its span,
so it is safe to return to the caller, log, and put in an audit event.
"""

from __future__ import annotations

from typing import Protocol

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.secrets.scanner import SecretFinding, SecretScanner

SECRET_DETECTED = reason(
    "schedule.secret_detected",
    "A title or instruction contains a credential-shaped value; it was rejected, not stored",
)

_DEFAULT_SCANNER = SecretScanner()


class ScansSecrets(Protocol):
    """Anything with ``SecretScanner.scan``'s contract (the service's scanner port)."""

    def scan(self, text: str) -> list[SecretFinding]:
        """Findings (kind and span, never the value); empty when ``text`` is clean."""
        ...


def reject_secrets(field_name: str, text: str, scanner: ScansSecrets | None = None) -> None:
    """Raise ``ValidationError(SECRET_DETECTED)`` when ``text`` holds a credential.

    ``field_name`` must be a fixed name chosen by the caller (``"title"``,
    ``"instruction"``), never user input. Details are ``{"field", "kinds"}``.
    """
    findings = (scanner or _DEFAULT_SCANNER).scan(text)
    if not findings:
        return
    kinds = sorted({finding.kind for finding in findings})
    raise ValidationError(
        SECRET_DETECTED,
        f"{field_name} contains a credential-shaped value ({', '.join(kinds)}); "
        "remove it and refer to a stored credential instead",
        {"field": field_name, "kinds": kinds},
    )
