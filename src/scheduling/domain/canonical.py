"""Canonical JSON: the one serialization behind revision definitions and content hashes.

Rules (stable; changing them changes every stored hash): UTF-8, object keys sorted,
no insignificant whitespace, no NaN/Infinity, non-ASCII kept as is. Sets must be
given as sorted lists by the caller so the form is total.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """The canonical text of a JSON-compatible ``value``."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def content_hash(value: Any) -> str:
    """``sha256:<hex>`` of the canonical text: a stable content-derived identifier."""
    digest = hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
