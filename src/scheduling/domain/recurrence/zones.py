"""The time-zone authority: zoneinfo rules loaded from the ``tzdata`` package only.

``zoneinfo.ZoneInfo(key)`` searches the host's ``TZPATH`` first and falls back to
``tzdata``; results would then depend on the machine. Here every zone is built with
``ZoneInfo.from_file`` over the ``tzdata`` package's own TZif resource, so one pinned
``tzdata`` version gives the same answer everywhere (ADR-0201). Reading a packaged
resource is the same file access ``zoneinfo`` itself performs; no clock, no network.
"""

from __future__ import annotations

import io
from functools import cache
from importlib import resources
from zoneinfo import ZoneInfo

# "Factory" is the placeholder zone for "local time unknown" ("-00"); it is not a place.
_NOT_PLACES = frozenset({"Factory"})


@cache
def zone_keys() -> frozenset[str]:
    """Every IANA key the installed ``tzdata`` package ships (zones and links)."""
    text = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip()) - _NOT_PLACES


def is_zone(key: str) -> bool:
    """Whether ``key`` names a zone of the installed ``tzdata`` (exact spelling)."""
    return key in zone_keys()


@cache
def zone_bytes(key: str) -> bytes:
    """The TZif bytes of ``key`` from the ``tzdata`` package."""
    if not is_zone(key):
        raise KeyError(key)
    resource = resources.files("tzdata.zoneinfo").joinpath(*key.split("/"))
    return resource.read_bytes()


@cache
def load_zone(key: str) -> ZoneInfo:
    """The ``ZoneInfo`` for ``key`` built from ``tzdata``, never from host files."""
    return ZoneInfo.from_file(io.BytesIO(zone_bytes(key)), key=key)
