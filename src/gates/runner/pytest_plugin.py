"""The pytest plugin that binds checks to gates and records their evidence.

A gate check is an ordinary pytest test marked with its gate id::

    @pytest.mark.gate("gate.schedule.civil_time")
    def test_fold_picks_earlier_instant(gate_evidence): ...

    @pytest.mark.gate("gate.schedule.not_early", facet="calculator")
    def test_next_after_never_early(gate_evidence): ...

An unknown gate id or facet fails collection. ``gate_evidence`` lets a check attach
what it tried (examples, seeds, interleavings, crash points hit); a check that finds
it could not exercise what it claims calls ``gate_evidence.not_covered(reason)``,
which makes the gate ERROR, never PASS.

With ``--gate-results FILE`` the plugin writes every bound check's outcome and
evidence as JSON (the gate runner reads it); with ``--gate-inventory FILE`` it
writes the bindings of every collected check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from catalog import load_catalog
from catalog.rules import load_rules
from gates.runner.shard import Shard, longest_first, shard_checks

BINDING_KEY = "gate_binding"
EVIDENCE_KEY = "gate_evidence"
NOT_COVERED_KEY = "gate_not_covered"
PROFILE_ENV = "SCHEDULING_GATE_PROFILE"
SEED_ENV = "SCHEDULING_GATE_SEED"
PROFILES = ("quick", "deep")


class GateNotCovered(Exception):
    """Raised by a check that could not exercise what its gate claims."""


@dataclass
class GateEvidence:
    """Evidence a check attaches to its gate (JSON-serializable values only)."""

    values: dict[str, Any] = field(default_factory=dict)

    def record(self, key: str, value: Any) -> None:
        """Set ``key`` to a JSON-serializable ``value`` (replaces an earlier value)."""
        self.values[key] = _plain(value)

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key``."""
        self.values[key] = int(self.values.get(key, 0)) + n

    def append(self, key: str, value: Any) -> None:
        """Append ``value`` to the list ``key``."""
        self.values.setdefault(key, []).append(_plain(value))

    def not_covered(self, reason: str) -> None:
        """Abort the check: it could not exercise its claim, so the gate is ERROR."""
        raise GateNotCovered(reason)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON types (str subclasses such as SQLAlchemy's quoted_name
    would not survive pytest-xdist's serializer); raises on anything not JSON."""
    return json.loads(json.dumps(value))


def gate_profile() -> str:
    """The active gate profile: ``quick`` (CI) or ``deep`` (far more exploration)."""
    profile = os.environ.get(PROFILE_ENV, "quick")
    if profile not in PROFILES:
        raise pytest.UsageError(f"{PROFILE_ENV} must be one of {PROFILES}, not {profile!r}")
    return profile


def gate_seed(default: int) -> int:
    """The gate run's seed: env ``SCHEDULING_GATE_SEED`` (the gate runner sets a new one
    per run, so each run explores new interleavings yet stays replayable), or
    ``default`` when unset, so plain ``pytest`` stays deterministic."""
    raw = os.environ.get(SEED_ENV)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{SEED_ENV} must be an integer, not {raw!r}") from None


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gates", "scheduling gate binding")
    group.addoption("--gate-results", metavar="FILE", help="write gate check results as JSON")
    group.addoption("--gate-inventory", metavar="FILE", help="write collected gate bindings")
    group.addoption(
        "--gate-select",
        metavar="JSON",
        help='run only the bound checks of these ids, e.g. {"ids": [...], "shard": [1, 2]}'
        " (shard optional); deselect every other test",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "gate(id, facet=None): bind this test as a check of a hard gate"
    )
    config.addinivalue_line(
        "markers", "rule(id): bind this test as a check of a spec rule (catalog/rules.toml)"
    )
    _register_hypothesis_profiles()
    if config.getoption("--gate-inventory", None):
        config.pluginmanager.register(CollectErrors(), CollectErrors.NAME)
    if config.getoption("--gate-results", None) and not _is_xdist_worker(config):
        config.pluginmanager.register(ResultCollector(config), "gate_result_collector")


def _register_hypothesis_profiles() -> None:
    common: dict[str, Any] = {
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
        "print_blob": True,
    }
    settings.register_profile("quick", max_examples=100, **common)
    settings.register_profile("deep", max_examples=5_000, **common)
    settings.load_profile(gate_profile())


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def binding_of(item: pytest.Item) -> tuple[str, str] | None:
    """The (gate id, facet) an item is bound to, validated against the catalog; a rule
    check binds as (rule id, ``check``)."""
    rule = item.get_closest_marker("rule")
    marker = item.get_closest_marker("gate")
    if rule is not None:
        if marker is not None:
            raise pytest.UsageError(f"{item.nodeid}: bind a check to a gate or a rule, not both")
        if len(rule.args) != 1 or rule.args[0] not in load_rules():
            raise pytest.UsageError(f"{item.nodeid}: unknown rule {rule.args!r}")
        return str(rule.args[0]), "check"
    if marker is None:
        return None
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.gate('gate.schedule.x')")
    gate_id = marker.args[0]
    catalog = load_catalog()
    if gate_id not in catalog:
        raise pytest.UsageError(f"{item.nodeid}: unknown gate id {gate_id!r}")
    gate = catalog.get(gate_id)
    facet = marker.kwargs.get("facet")
    if facet is None:
        if len(gate.facets) != 1:
            raise pytest.UsageError(
                f"{item.nodeid}: {gate_id} has facets {list(gate.facets)}; name one with facet="
            )
        facet = gate.facets[0]
    if facet not in gate.facets:
        raise pytest.UsageError(
            f"{item.nodeid}: {gate_id} has no facet {facet!r} (facets: {list(gate.facets)})"
        )
    return gate_id, facet


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    inventory = []
    bound: dict[str, str] = {}
    for item in items:
        binding = binding_of(item)
        if binding is None:
            continue
        item.user_properties.append((BINDING_KEY, {"gate": binding[0], "facet": binding[1]}))
        inventory.append({"nodeid": item.nodeid, "gate": binding[0], "facet": binding[1]})
        bound[item.nodeid] = binding[0]
    path = config.getoption("--gate-inventory", None)
    if path and _writes_once(config):
        collector = config.pluginmanager.get_plugin(CollectErrors.NAME)
        errors = collector.errors if isinstance(collector, CollectErrors) else []
        payload = {"checks": inventory, "errors": errors}
        Path(path).write_text(json.dumps(payload, indent=2), encoding="utf-8")
    select = config.getoption("--gate-select", None)
    if select:
        _select(config, items, bound, json.loads(select))


class CollectErrors:
    """Collection errors, written into the inventory: the runner reports them."""

    NAME = "gate_collect_errors"

    def __init__(self) -> None:
        self.errors: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(f"{report.nodeid}: {report.longreprtext[-3000:]}")


def _writes_once(config: pytest.Config) -> bool:
    """The process that writes run-wide files: the only one, or xdist's first worker
    (the controller collects nothing; every worker collects the same items)."""
    if not _is_xdist_worker(config):
        return True
    return bool(getattr(config, "workerinput", {}).get("workerid") == "gw0")


def _select(
    config: pytest.Config, items: list[pytest.Item], bound: dict[str, str], chosen: dict[str, Any]
) -> None:
    """Keep the bound checks of the chosen ids (and of the shard); deselect the rest."""
    ids = set(chosen["ids"])
    keep = {n for n, gate in bound.items() if gate in ids}
    if chosen.get("shard"):
        index, total = chosen["shard"]
        keep = set(shard_checks(keep, Shard(int(index), int(total))))
    kept = [i for i in items if i.nodeid in keep]
    if chosen.get("longest_first"):
        rank = {n: k for k, n in enumerate(longest_first(keep))}
        kept.sort(key=lambda i: rank[i.nodeid])
    dropped = [i for i in items if i.nodeid not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


@pytest.fixture
def gate_evidence(request: pytest.FixtureRequest) -> Iterator[GateEvidence]:
    """Evidence for the running gate check; stored with its result."""
    evidence = GateEvidence()
    yield evidence
    request.node.user_properties.append((EVIDENCE_KEY, evidence.values))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    if call.excinfo is not None and call.excinfo.errisinstance(GateNotCovered):
        item.user_properties.append((NOT_COVERED_KEY, str(call.excinfo.value)))
    yield


class ResultCollector:
    """Collects the outcome of every bound check (also across xdist workers)."""

    def __init__(self, config: pytest.Config) -> None:
        self.path = Path(config.getoption("--gate-results"))
        self.results: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props: dict[str, Any] = dict(report.user_properties)
        binding = props.get(BINDING_KEY)
        if binding is None:
            return
        entry = self.results.setdefault(
            report.nodeid,
            {
                "nodeid": report.nodeid,
                "gate": binding["gate"],
                "facet": binding["facet"],
                "outcome": "passed",
                "duration_s": 0.0,
                "detail": None,
                "evidence": {},
            },
        )
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 6)
        if EVIDENCE_KEY in props:
            entry["evidence"] = props[EVIDENCE_KEY]
        outcome = _phase_outcome(report, props)
        if outcome is not None and _SEVERITY[outcome] > _SEVERITY[entry["outcome"]]:
            entry["outcome"] = outcome
            entry["detail"] = _detail(report, props)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        payload = {"results": sorted(self.results.values(), key=lambda r: r["nodeid"])}
        self.path.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")


# How bad a check's outcome is; the worst phase wins.
_SEVERITY = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}


def _phase_outcome(report: pytest.TestReport, props: dict[str, Any]) -> str | None:
    if report.passed:
        return None
    if report.skipped:
        return "skipped"
    if NOT_COVERED_KEY in props or report.when != "call":
        return "error"
    return "failed"


def _detail(report: pytest.TestReport, props: dict[str, Any]) -> str:
    if NOT_COVERED_KEY in props:
        return f"not covered: {props[NOT_COVERED_KEY]}"
    if report.skipped and isinstance(report.longrepr, tuple):
        return f"could not run: {report.longrepr[2]}"
    text = report.longreprtext or ""
    return text[-4000:]
