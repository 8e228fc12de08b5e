"""schemathesis hooks for ``test_schemathesis.py`` (loaded by the CLI through
``SCHEMATHESIS_HOOKS``; not a test module): one recording check that writes every
response's operation, generation mode, phase, status and error code to the NDJSON file
named by ``ST_RECORD``, so the test can count cases, 5xx and positive refusals by code
(the CLI's summary counts unique failures only)."""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis


def _error_code(response: Any) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except Exception:  # not an error envelope (a 2xx body, plain text)
        return None


@schemathesis.check
def record_every_response(ctx: Any, response: Any, case: Any) -> bool | None:
    meta = case.meta
    row = {
        "operation": case.operation.label,
        "mode": None if meta is None else str(meta.generation.mode.value),
        "phase": None if meta is None else str(meta.phase.name.value),
        "status": int(response.status_code),
        "code": _error_code(response),
        # The coverage phase sometimes pairs a header scenario with a non-object body
        # (``0``) and labels the case positive: not schema-valid data at all.
        "object_body": isinstance(case.body, dict),
        "has_body": case.operation.body is not None and len(case.operation.body) > 0,
    }
    with open(os.environ["ST_RECORD"], "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
    return None
