"""Every registered reason code is documented in docs/reason-codes.md, and only those.

Imports every module of the ``scheduling`` package (so every ``reason(...)`` call has
run), then compares ``all_reasons()`` with the table rows of the document, code and
meaning alike.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import scheduling
from scheduling.domain.reasons import all_reasons

DOC = Path(__file__).resolve().parents[2] / "docs" / "reason-codes.md"
ROW = re.compile(r"^\|\s*(schedule\.[a-z0-9_.]+)\s*\|\s*(.*?)\s*\|\s*$")


def import_everything() -> int:
    count = 0
    for info in pkgutil.walk_packages(scheduling.__path__, prefix="scheduling."):
        importlib.import_module(info.name)
        count += 1
    return count


def documented() -> dict[str, str]:
    rows: dict[str, str] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            assert match[1] not in rows, f"{match[1]} is documented twice"
            rows[match[1]] = match[2]
    return rows


def test_documented_codes_equal_registered_codes() -> None:
    assert import_everything() > 10
    registered = all_reasons()
    docs = documented()
    missing = sorted(set(registered) - set(docs))
    stale = sorted(set(docs) - set(registered))
    assert not missing, f"registered but not documented in {DOC.name}: {missing}"
    assert not stale, f"documented but not registered: {stale}"
    wrong = sorted(code for code in registered if docs[code] != registered[code])
    assert not wrong, f"meanings differ from the code's: {wrong}"
