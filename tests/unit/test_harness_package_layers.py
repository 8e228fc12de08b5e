"""The contracts that keep the harness packages from looping (ADR 2210) fail on a loop.

pyproject's own contracts, run by ``lint-imports`` over a scratch tree of stub packages
named like ours: kept when gates imports reports and reports imports the catalog,
broken when reports imports gates or the catalog imports reports (the arrows the move
of ``gates.catalog`` to ``catalog`` ended).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = (
    "No package loop in the harness: gates above reports above the catalog",
    "Reports read the catalog, never gates, the simulator or the product",
    "The catalog (gates, rules, milestones, provenance) is data: "
    "no product, simulator, report or gate code",
)
PACKAGES = ("scheduling", "simulation", "catalog", "reports", "gates")
HONEST = {
    "catalog/rules.py": "",
    "reports/verify.py": "import catalog.rules\n",
    "gates/runner.py": "import reports.verify\nimport catalog.rules\n",
}


def _toml_value(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    assert isinstance(value, list)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


def _config(contracts: list[dict[str, object]]) -> str:
    lines = [
        "[tool.importlinter]",
        f"root_packages = {_toml_value(list(PACKAGES))}",
    ]
    for contract in contracts:
        lines.append("[[tool.importlinter.contracts]]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in contract.items()]
    return "\n".join(lines) + "\n"


def _ours() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    by_name = {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}
    return [by_name[name] for name in CONTRACTS]


def _lint(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    config = tmp_path / "contracts.toml"
    config.write_text(_config(_ours()))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_layered_harness_keeps_the_contracts(tmp_path: Path) -> None:
    proc = _lint(tmp_path, HONEST)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 kept, 0 broken" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("planted", "broken"),
    [
        ({"reports/verify.py": "import catalog.rules\nimport gates.runner\n"}, 2),
        ({"catalog/rules.py": "import reports.verify\n"}, 2),
    ],
    ids=["reports->gates", "catalog->reports"],
)
def test_a_loop_through_reports_breaks_them(
    tmp_path: Path, planted: dict[str, str], broken: int
) -> None:
    proc = _lint(tmp_path, {**HONEST, **planted})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{3 - broken} kept, {broken} broken" in proc.stdout, proc.stdout
