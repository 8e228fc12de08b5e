"""gate.schedule.repository_contract: every port has a named shared contract suite and
every registered adapter passes it.

The registry is ``tests/contract/registry.toml``. The check (1) validates it against
the code: the spec's three scheduling ports (definition, occurrence, request
idempotency) are registered, each suite class exists and calls every method of its
protocol, every adapter named by a port is registered, and every unit-of-work
factory found under ``scheduling.adapters`` is registered; then (2) runs
``tests/contract`` in a subprocess and requires, for every (port, adapter) pair, that
every test of the suite ran for that adapter and passed, and that the suite called
every method of the protocol (read every property) *on that adapter's own object*:
the contract fixtures hand each test its factory behind the recording proxy of
``gates.checks.contract_calls``, so a call on another object with the same method name
(a stub, a helper, another repository) does not count. An adapter registered without
its suite running, a failing suite, or a protocol member never reached on the adapter
fails the gate.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gates.checks.contract_calls import CALLS_ENV, Call, read_calls
from gates.runner.pytest_plugin import GateEvidence

ROOT = Path(__file__).resolve().parents[3]  # the checkout
CONTRACT_DIR = ROOT / "tests" / "contract"
REGISTRY = CONTRACT_DIR / "registry.toml"
ADAPTERS_DIR = ROOT / "src" / "scheduling" / "adapters"
SPEC_PORTS = ("definition", "occurrence", "request-idempotency")

# (suite, adapter) -> Counter of outcomes ("passed", "failed", "skipped", "error")
Results = dict[tuple[str, str], Counter[str]]


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _suite_tests(suite: str, contract_dir: Path) -> tuple[list[str], str] | None:
    """Test method names of ``file.py::Class`` and the class source, or None if absent."""
    filename, _, cls = suite.partition("::")
    path = contract_dir / filename
    if not path.is_file():
        return None
    source = path.read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            tests = [
                n.name
                for n in node.body
                if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)
                and n.name.startswith("test_")
            ]
            return tests, ast.get_source_segment(source, node) or ""
    return None


def _used_members(source: str) -> tuple[set[str], set[str]]:
    """Names the suite calls as methods (``x.name(...)``) and names it reads as
    attributes (``x.name``), from the syntax tree rather than a substring match."""
    tree = ast.parse(source)
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    return called, read


def _protocol_methods(protocol: Any) -> list[str]:
    return sorted(
        name
        for name, member in vars(protocol).items()
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    )


def discovered_factories(adapters_dir: Path = ADAPTERS_DIR) -> set[str]:
    """``module:Class`` of every ``*UnitOfWorkFactory`` class defined under the adapters."""
    found = set()
    for path in adapters_dir.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(adapters_dir.parent.parent).with_suffix("").parts)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("UnitOfWorkFactory"):
                found.add(f"{module}:{node.name}")
    return found


def registry_problems(
    registry: dict[str, Any],
    results: Results | None,
    contract_dir: Path = CONTRACT_DIR,
    factories: set[str] | None = None,
    calls: set[Call] | None = None,
) -> list[str]:
    """Everything wrong with the registry and, when given, the contract run's results
    and the calls recorded into each adapter's own methods."""
    problems: list[str] = []
    adapters = registry.get("adapters", {})
    ports = registry.get("ports", [])
    registered_factories = {spec.get("factory", "") for spec in adapters.values()}
    for factory in sorted((factories or set()) - registered_factories):
        problems.append(f"adapter factory {factory} is not registered in registry.toml")
    for name, spec in adapters.items():
        try:
            _load(spec["factory"])
        except (KeyError, ImportError, AttributeError) as exc:
            problems.append(f"adapter {name}: factory cannot be imported ({exc!r})")
    covered = {p.get("spec_port") for p in ports}
    for spec_port in SPEC_PORTS:
        if spec_port not in covered:
            problems.append(f"the spec's {spec_port} port has no registered contract suite")
    for port in ports:
        label = port.get("name", "?")
        suite = port.get("suite", "")
        found = _suite_tests(suite, contract_dir)
        if found is None:
            problems.append(f"{label}: contract suite {suite!r} does not exist")
            continue
        tests, source = found
        if not tests:
            problems.append(f"{label}: contract suite {suite!r} has no tests")
        try:
            protocol = _load(port["protocol"])
        except (KeyError, ImportError, AttributeError) as exc:
            problems.append(f"{label}: protocol cannot be imported ({exc!r})")
            protocol = None
        if protocol is not None:
            called, read = _used_members(source)
            for method in _protocol_methods(protocol):
                # A property must be read; a method must be called, not merely mentioned.
                is_property = isinstance(vars(protocol)[method], property)
                if method not in (read if is_property else called):
                    verb = "reads" if is_property else "calls"
                    problems.append(f"{label}: suite never {verb} {method}")
        if not port.get("adapters"):
            problems.append(f"{label}: no adapter is registered for the port")
        for adapter in port.get("adapters", []):
            if adapter not in adapters:
                problems.append(f"{label}: adapter {adapter!r} is not a registered adapter")
            if protocol is not None and calls is not None:
                attribute = port.get("attribute", "")
                for method in _protocol_methods(protocol):
                    if (suite, adapter, attribute, method) not in calls:
                        problems.append(
                            f"{label} on {adapter}: the suite never reached the adapter's"
                            f" own {method}"
                        )
            if results is None:
                continue
            outcome = results.get((suite, adapter), Counter())
            if outcome["passed"] != len(tests) or sum(outcome.values()) != len(tests):
                problems.append(
                    f"{label} on {adapter}: {outcome['passed']} of {len(tests)} contract tests"
                    f" passed ({dict(outcome)})"
                )
    return problems


def parse_junit(path: Path) -> Results:
    """Outcomes per (``file.py::Class``, adapter) from a pytest JUnit XML report."""
    results: Results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if "[" not in name or "." not in classname:
            continue
        module, cls = classname.rsplit(".", 1)
        suite = f"{module.rsplit('.', 1)[-1]}.py::{cls}"
        adapter = name[name.index("[") + 1 : -1]
        if case.find("failure") is not None:
            outcome = "failed"
        elif case.find("error") is not None:
            outcome = "error"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        results.setdefault((suite, adapter), Counter())[outcome] += 1
    return results


def run_contract_suites(junit: Path, calls: Path) -> subprocess.CompletedProcess[str]:
    """Run ``tests/contract`` as its own pytest session (no xdist, no gate binding);
    the adapter calls it records are written to ``calls``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(CONTRACT_DIR),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            f"--junitxml={junit}",
        ],
        cwd=ROOT,
        env={**os.environ, CALLS_ENV: str(calls)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.gate("gate.schedule.repository_contract")
def test_every_registered_adapter_passes_its_ports_contract(
    pg_server: object, tmp_path: Path, gate_evidence: GateEvidence
) -> None:
    # pg_server exports SCHEDULING_DATABASE_URL, so the subprocess reuses this server.
    registry = tomllib.loads(REGISTRY.read_text(encoding="utf-8"))
    factories = discovered_factories()
    static = registry_problems(registry, None, factories=factories)
    assert static == [], static
    junit = tmp_path / "contract.xml"
    calls_file = tmp_path / "calls.json"
    run = run_contract_suites(junit, calls_file)
    assert junit.is_file(), run.stdout[-2000:] + run.stderr[-2000:]
    assert calls_file.is_file(), "the contract session recorded no adapter calls"
    results = parse_junit(junit)
    calls = read_calls(calls_file)
    problems = registry_problems(registry, results, factories=factories, calls=calls)
    assert problems == [], problems
    assert run.returncode == 0, run.stdout[-4000:]
    gate_evidence.record("registry", str(REGISTRY.relative_to(ROOT)))
    gate_evidence.record("adapters", sorted(registry["adapters"]))
    gate_evidence.record("factories_discovered", sorted(factories))
    gate_evidence.record(
        "suites",
        {
            p["name"]: {a: dict(results[(p["suite"], a)]) for a in p["adapters"]}
            for p in registry["ports"]
        },
    )
    gate_evidence.record(
        "adapter_calls_recorded",
        {
            f"{p['name']} on {a}": sum(
                1 for c in calls if c[:3] == (p["suite"], a, p.get("attribute", ""))
            )
            for p in registry["ports"]
            for a in p["adapters"]
        },
    )
    gate_evidence.record("command", f"{sys.executable} -m pytest tests/contract")
