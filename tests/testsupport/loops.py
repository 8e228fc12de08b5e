"""Test helpers for the event loop the long-running roles choose (ADR 2640, 2700)."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import uvloop`` fail as it does where uvloop is not installed."""
    real = importlib.import_module

    def refuse(name: str, package: str | None = None) -> ModuleType:
        if name == "uvloop":
            raise ModuleNotFoundError("No module named 'uvloop'", name="uvloop")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", refuse)
