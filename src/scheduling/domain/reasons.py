"""The registry of stable ``schedule.*`` reason codes.

Every module that can fail declares its codes through ``reason(code, meaning)``
at import time, so one list (``all_reasons()``) can be compared with the documented
list in ``docs/reason-codes.md`` by a test. Codes are part of the public contract:
never rename one; add a new one instead.
"""

from __future__ import annotations

import re

_CODE = re.compile(r"^schedule(\.[a-z0-9_]+)+$")
_REGISTRY: dict[str, str] = {}


def reason(code: str, meaning: str) -> str:
    """Register ``code`` with its one-line ``meaning`` and return the code."""
    if not _CODE.match(code):
        raise ValueError(f"reason code {code!r} must look like schedule.area.name")
    existing = _REGISTRY.get(code)
    if existing is not None and existing != meaning:
        raise ValueError(f"reason code {code!r} registered twice with different meanings")
    _REGISTRY[code] = meaning
    return code


def all_reasons() -> dict[str, str]:
    """Every registered code and its meaning (import the modules that declare them first)."""
    return dict(sorted(_REGISTRY.items()))
