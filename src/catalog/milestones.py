"""The declared milestones: the status of milestones this suite does not verify.

``milestones.toml`` (shipped) or a deployment's own file (``scheduling-gates run
--milestones FILE``) says, per milestone outside the suite, whether it is complete, in
progress or not started, and where that claim comes from. It was called the "milestone
ledger" (ADR 2210); the report format keeps that word in its JSON fields (``run.ledger``,
``provenance.ledger_sha256``, ``milestones[].source == "ledger"``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

SHIPPED_FILE = "milestones.toml"
SHIPPED_ORIGIN = "shipped milestones (src/catalog/milestones.toml)"


class MilestoneStatus(StrEnum):
    COMPLETE = "complete"
    IN_PROGRESS = "in_progress"
    NOT_STARTED = "not_started"


@dataclass(frozen=True)
class MilestoneEntry:
    number: int
    status: MilestoneStatus
    source: str


class MilestonesError(ValueError):
    """A milestone file that cannot be trusted (malformed, duplicated, or claims a
    suite milestone)."""


@dataclass(frozen=True)
class Milestones:
    """The declared milestones, by number, and where they were read from."""

    entries: dict[int, MilestoneEntry]
    origin: str

    def get(self, number: int) -> MilestoneEntry | None:
        return self.entries.get(number)


def parse_milestones(text: str, origin: str, suite_milestones: list[int]) -> Milestones:
    """Parse a milestone file; it may not speak for milestones the suite itself verifies."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MilestonesError(f"{origin}: not valid TOML: {exc}") from exc
    entries: dict[int, MilestoneEntry] = {}
    for raw in data.get("milestone", []):
        try:
            entry = MilestoneEntry(
                number=int(raw["number"]),
                status=MilestoneStatus(raw["status"]),
                source=str(raw.get("source", "")),
            )
        except (KeyError, ValueError) as exc:
            raise MilestonesError(f"{origin}: bad milestone entry {raw!r}: {exc}") from exc
        if entry.number < 1:
            raise MilestonesError(f"{origin}: milestone numbers start at 1, got {entry.number}")
        if entry.number in entries:
            raise MilestonesError(f"{origin}: milestone {entry.number} listed twice")
        if entry.number in suite_milestones:
            raise MilestonesError(
                f"{origin}: milestone {entry.number} is verified by this suite's gates; "
                "a milestone file cannot declare its status"
            )
        entries[entry.number] = entry
    return Milestones(entries=entries, origin=origin)


def shipped_milestones_text() -> str:
    return resources.files("catalog").joinpath(SHIPPED_FILE).read_text(encoding="utf-8")


def load_milestones(path: Path | None, suite_milestones: list[int]) -> Milestones:
    """The milestone file at ``path``, or the shipped one."""
    if path is None:
        return parse_milestones(shipped_milestones_text(), SHIPPED_ORIGIN, suite_milestones)
    return parse_milestones(path.read_text(encoding="utf-8"), str(path), suite_milestones)
