"""``--shard K/N``: a deterministic 1/N of the bound checks, balanced by recorded duration.

The partition depends only on the set of node ids and the shipped duration table
(``durations.json`` beside this module), so every shard of one commit computes the same
partition without talking to the others. Longest first, each check goes to the shard
with the least recorded time so far (ties: the lowest index); a check the table does
not know weighs the table's median. Node ids break every tie, so the order of the
input never matters.

Refresh the table from a full quick run (the partition only balances by it; any table
gives a correct partition, and ``merge`` checks the parts cover every check once)::

    python -m gates.runner.shard reports/out/gate-report.json > src/gates/runner/durations.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DURATIONS_FILE = "durations.json"
DEFAULT_WEIGHT = 1.0


class ShardError(ValueError):
    """A ``--shard`` value that is not ``K/N`` with ``1 <= K <= N``."""


@dataclass(frozen=True)
class Shard:
    index: int  # from 1
    total: int

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def parse_shard(text: str) -> Shard:
    index, slash, total = text.partition("/")
    if not slash or not index.isdigit() or not total.isdigit():
        raise ShardError(f"not a shard: {text!r} (use K/N, e.g. 1/2)")
    shard = Shard(int(index), int(total))
    if not 1 <= shard.index <= shard.total:
        raise ShardError(f"not a shard: {text!r} (K must be between 1 and N)")
    return shard


def shipped_durations() -> dict[str, float]:
    text = resources.files("gates.runner").joinpath(DURATIONS_FILE).read_text(encoding="utf-8")
    return {str(k): float(v) for k, v in json.loads(text).items()}


def partition(
    nodeids: Iterable[str], total: int, durations: Mapping[str, float]
) -> list[list[str]]:
    """``total`` disjoint lists covering ``nodeids`` (each sorted), balanced by duration."""
    ids = sorted(set(nodeids))
    default = statistics.median(durations.values()) if durations else DEFAULT_WEIGHT
    weight = {n: max(float(durations.get(n, default)), 0.0) for n in ids}
    loads = [0.0] * total
    parts: list[list[str]] = [[] for _ in range(total)]
    for nodeid in sorted(ids, key=lambda n: (-weight[n], n)):
        k = min(range(total), key=lambda i: (loads[i], i))
        parts[k].append(nodeid)
        loads[k] += weight[nodeid]
    return [sorted(p) for p in parts]


def longest_first(
    nodeids: Iterable[str], durations: Mapping[str, float] | None = None
) -> list[str]:
    """``nodeids`` by recorded duration, longest first (ties by id): the order that lets
    xdist's workers finish together."""
    table = shipped_durations() if durations is None else durations
    default = statistics.median(table.values()) if table else DEFAULT_WEIGHT
    return sorted(set(nodeids), key=lambda n: (-float(table.get(n, default)), n))


def shard_checks(
    nodeids: Iterable[str], shard: Shard, durations: Mapping[str, float] | None = None
) -> list[str]:
    """The node ids shard ``K/N`` runs."""
    table = shipped_durations() if durations is None else durations
    return partition(nodeids, shard.total, table)[shard.index - 1]


def recorded_durations(report: Mapping[str, object]) -> dict[str, float]:
    """Every check's ``duration_s`` in a gate-report.json (gates and rules)."""
    out: dict[str, float] = {}
    for section in ("gates", "rules"):
        entries = report.get(section, [])
        assert isinstance(entries, list)
        for entry in entries:
            for check in entry.get("checks", []):
                if not check["nodeid"].startswith("<"):
                    out[check["nodeid"]] = round(float(check["duration_s"]), 2)
    return dict(sorted(out.items()))


def main(argv: Sequence[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gates.runner.shard GATE-REPORT.json", file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    print(json.dumps(recorded_durations(report), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
