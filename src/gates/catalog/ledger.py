"""The milestone ledger: the status of milestones outside this suite."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path


class LedgerStatus(StrEnum):
    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"
    NOT_STARTED = "not_started"


@dataclass(frozen=True)
class LedgerEntry:
    number: int
    status: LedgerStatus
    source: str


class LedgerError(ValueError):
    """A ledger that cannot be trusted (malformed, duplicated, or claims a suite milestone)."""


@dataclass(frozen=True)
class Ledger:
    entries: dict[int, LedgerEntry]
    origin: str

    def get(self, number: int) -> LedgerEntry | None:
        return self.entries.get(number)


def parse_ledger(text: str, origin: str, suite_milestones: list[int]) -> Ledger:
    """Parse a ledger; it may not speak for milestones the suite itself verifies."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LedgerError(f"{origin}: not valid TOML: {exc}") from exc
    entries: dict[int, LedgerEntry] = {}
    for raw in data.get("milestone", []):
        try:
            entry = LedgerEntry(
                number=int(raw["number"]),
                status=LedgerStatus(raw["status"]),
                source=str(raw.get("source", "")),
            )
        except (KeyError, ValueError) as exc:
            raise LedgerError(f"{origin}: bad milestone entry {raw!r}: {exc}") from exc
        if entry.number < 1:
            raise LedgerError(f"{origin}: milestone numbers start at 1, got {entry.number}")
        if entry.number in entries:
            raise LedgerError(f"{origin}: milestone {entry.number} listed twice")
        if entry.number in suite_milestones:
            raise LedgerError(
                f"{origin}: milestone {entry.number} is verified by this suite's gates; "
                "a ledger cannot declare its status"
            )
        entries[entry.number] = entry
    return Ledger(entries=entries, origin=origin)


def load_ledger(path: Path | None, suite_milestones: list[int]) -> Ledger:
    """The ledger at ``path``, or the shipped one."""
    if path is None:
        text = resources.files("gates.catalog").joinpath("ledger.toml").read_text(encoding="utf-8")
        return parse_ledger(
            text, "shipped ledger (src/gates/catalog/ledger.toml)", suite_milestones
        )
    return parse_ledger(path.read_text(encoding="utf-8"), str(path), suite_milestones)
