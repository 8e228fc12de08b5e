"""Facts about the time-zone authority in use (reads package metadata, so not domain)."""

from __future__ import annotations

import importlib
from importlib import metadata


def tzdata_version() -> str:
    """The IANA release of the installed ``tzdata`` package, e.g. ``2026f``."""
    return str(importlib.import_module("tzdata").IANA_VERSION)


def tzdata_package_version() -> str:
    """The ``tzdata`` distribution version, e.g. ``2026.6``."""
    return metadata.version("tzdata")
