"""The idempotency key every mutating call carries (HTTP, model tools, the CLI).

One rule for every edge and the tool pipeline: 1 to ``MAX_IDEMPOTENCY_KEY`` printable
ASCII characters, no space; NUL and lone surrogates get the one text code first.
"""

from __future__ import annotations

from scheduling.domain.errors import ValidationError
from scheduling.domain.reasons import reason
from scheduling.domain.text import check_text

INVALID_IDEMPOTENCY_KEY = reason(
    "schedule.validation.invalid_idempotency_key",
    "The idempotency key is empty, too long or not printable ASCII",
)
MAX_IDEMPOTENCY_KEY = 200


def check_idempotency_key(key: str) -> str:
    if isinstance(key, str):
        # NUL and lone surrogates get the one text code, like every stored text.
        check_text("idempotency_key", key)
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY
        or not all(" " < ch <= "~" for ch in key)
    ):
        raise ValidationError(INVALID_IDEMPOTENCY_KEY, "the idempotency key is not valid")
    return key
