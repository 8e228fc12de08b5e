"""The gate catalog: the spec's 46 hard gates, loaded from ``catalog.toml``."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources


class GateKind(StrEnum):
    PROPERTY = "property"
    CASE = "case"
    STRUCTURAL = "structural"
    CORPUS = "corpus"


@dataclass(frozen=True)
class Gate:
    """One hard gate: its id, kind, milestone, the spec's statement and its facets.

    A facet is an independent half of the gate's claim (for example the calculator
    half and the materializer half of ``not_early``). A gate passes only when every
    facet has at least one bound check and every bound check passed.
    """

    id: str
    kind: GateKind
    milestone: int
    statement: str
    facets: tuple[str, ...]

    @property
    def title(self) -> str:
        """The statement's first sentence."""
        return self.statement.split(". ", 1)[0].rstrip(".")


class Catalog:
    """An ordered, id-indexed collection of gates."""

    def __init__(self, gates: list[Gate]) -> None:
        ids = [g.id for g in gates]
        duplicates = {i for i in ids if ids.count(i) > 1}
        if duplicates:
            raise ValueError(f"duplicate gate ids in catalog: {sorted(duplicates)}")
        self._gates = {g.id: g for g in gates}

    def __iter__(self) -> Iterator[Gate]:
        return iter(self._gates.values())

    def __len__(self) -> int:
        return len(self._gates)

    def __contains__(self, gate_id: object) -> bool:
        return gate_id in self._gates

    def get(self, gate_id: str) -> Gate:
        try:
            return self._gates[gate_id]
        except KeyError:
            raise KeyError(f"unknown gate id {gate_id!r}") from None

    @property
    def ids(self) -> list[str]:
        return list(self._gates)

    def milestones(self) -> list[int]:
        """The milestones this suite verifies, ascending."""
        return sorted({g.milestone for g in self._gates.values()})

    def in_milestone(self, milestone: int) -> list[Gate]:
        return [g for g in self._gates.values() if g.milestone == milestone]


def parse_catalog(text: str) -> Catalog:
    data = tomllib.loads(text)
    gates = [
        Gate(
            id=entry["id"],
            kind=GateKind(entry["kind"]),
            milestone=int(entry["milestone"]),
            statement=entry["statement"],
            facets=tuple(entry.get("facets", ["check"])),
        )
        for entry in data["gate"]
    ]
    return Catalog(gates)


@cache
def load_catalog() -> Catalog:
    """The shipped catalog (all 46 gates of the spec)."""
    text = resources.files("catalog").joinpath("catalog.toml").read_text(encoding="utf-8")
    return parse_catalog(text)
