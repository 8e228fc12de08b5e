"""A pytest plugin for ``verify --rerun``: keep exactly the node ids listed in a file.

Node ids go through a file, not the command line: a parametrized id may hold ``/``,
spaces or brackets that pytest's argument parser would read as a path or a keyword.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("gates").addoption(
        "--rerun-nodeids",
        metavar="FILE",
        help="a JSON list of node ids: run only these, deselect every other test",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("--rerun-nodeids", None)
    if not path:
        return
    wanted = set(json.loads(Path(path).read_text(encoding="utf-8")))
    kept = [i for i in items if i.nodeid in wanted]
    dropped = [i for i in items if i.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
