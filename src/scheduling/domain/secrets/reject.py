"""The validation rule: a credential-shaped title or instruction is rejected.

The error names the field and the detector kinds only, never the value or its span,
so it is safe to return to the caller, log, and put in an audit event.
"""

from __future__ import annotations

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.secrets.scanner import SecretScanner

SECRET_DETECTED = reason(
    "schedule.secret_detected",
    "A title or instruction contains a credential-shaped value; it was rejected, not stored",
)

_DEFAULT_SCANNER = SecretScanner()


def reject_secrets(field_name: str, text: str, scanner: SecretScanner | None = None) -> None:
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
