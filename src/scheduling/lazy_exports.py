"""A package that imports a submodule only when one of its names is first asked for
(module ``__getattr__``, PEP 562): ``scheduling.bootstrap`` and ``scheduling.metrics``
keep ``from package import name`` working while a command that never uses a name never
imports the module behind it (FastAPI, uvicorn, the MCP SDK, a role's storage)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], home: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose name ``n`` lives in
    its submodule ``home[n]``; a name found once is kept in ``namespace`` (the package's
    globals), so the next access is an ordinary attribute read."""

    def getattr_(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *home})

    return getattr_, dir_
