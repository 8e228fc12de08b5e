"""Aimed cases: coverage a gate's ``not_covered`` guard demands, reached by construction.

A property check generates its cases from the run's seed, so whether a generated case
lands inside a real gap or fold is luck. The cases here are deterministic: for every
cadence kind a guard needs and for each of {gap, fold}, a wall time in the middle of a
real transition of several zones that have one, with a cadence of that kind selecting
the transition's local date. A check runs them through the same assertions as its
generated cases (and records them as evidence) before its property runs, so its guard
holds whatever the seed; the guard itself is unchanged and still fails a run whose
cases (aimed removed, generation narrowed) never reach a gap or a fold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from gates.checks.recurrence_support import Aim, oracle_resolve, transitions_of
from scheduling.domain.cadence import (
    CivilCadence,
    DailyCadence,
    MonthDay,
    MonthlyCadence,
    WeeklyCadence,
    YearlyCadence,
)

# Zones whose recent transitions are a plain gap and a plain fold inside one local date:
# northern and southern hemisphere, a 30-minute shift, and a zone that changes at 23:00.
AIM_ZONES = (
    "America/New_York",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
)
RULES = ("gap", "fold")
# The latest transition before this instant is aimed at: fixed, so aims never move.
BEFORE = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class AimedCase:
    """One deterministic case: ``cadence`` of ``kind`` must resolve ``aim.day`` by ``rule``."""

    kind: str
    rule: str
    aim: Aim
    cadence: CivilCadence

    def label(self) -> str:
        return f"{self.kind} {self.rule} {self.aim.zone} {self.aim.day} {self.aim.wall_time}"


def aim_at(zone: str, rule: str) -> Aim:
    """The middle of ``zone``'s latest ``rule`` transition before 2030, referenced two
    days before it (so next/latest/sequence from the reference cross it)."""
    wanted = [
        t
        for t in transitions_of(zone)
        if (t.is_gap if rule == "gap" else t.is_fold) and t.instant < BEFORE
    ]
    if not wanted:
        raise ValueError(f"{zone} has no {rule} before {BEFORE:%Y}")
    t = wanted[-1]
    low, high = sorted([t.wall_before(), t.wall_after()])
    wall = (low + (high - low) / 2).replace(microsecond=0)
    reference = t.instant - timedelta(days=2)
    return Aim(zone, t, wall.time(), wall.date(), reference, f"aimed-{rule}")


def cadence_selecting(kind: str, aim: Aim) -> CivilCadence:
    """The plainest ``kind`` cadence at the aim's wall time that selects its local date."""
    if kind == "DAILY":
        return DailyCadence(aim.wall_time, aim.zone)
    if kind == "WEEKLY":
        return WeeklyCadence(aim.wall_time, aim.zone, (aim.day.isoweekday(),))
    if kind == "MONTHLY":
        return MonthlyCadence(aim.wall_time, aim.zone, (aim.day.day,), False)
    if kind == "YEARLY":
        return YearlyCadence(aim.wall_time, aim.zone, (MonthDay(aim.day.month, aim.day.day),))
    raise ValueError(f"no civil cadence of kind {kind!r} (ONCE has no gap or fold)")


def aimed_cases(kinds: tuple[str, ...], zones: tuple[str, ...] = AIM_ZONES) -> list[AimedCase]:
    """Every kind x {gap, fold} x zone. Each aim is checked against the independent
    oracle here, so a case that stopped landing in its transition (new tzdata) fails
    loudly instead of quietly covering nothing."""
    cases = []
    for kind in kinds:
        for rule in RULES:
            for zone in zones:
                aim = aim_at(zone, rule)
                resolved = oracle_resolve(zone, aim.day, aim.wall_time)
                if resolved is None or resolved[1] != rule:
                    raise AssertionError(f"aimed {rule} in {zone} resolves as {resolved}")
                cases.append(AimedCase(kind, rule, aim, cadence_selecting(kind, aim)))
    return cases
