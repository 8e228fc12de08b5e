"""What a process edge supplies: settings from the real environment, the system clock
and random ids, and a uniform way to print a refusal."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from scheduling.adapters.system_clock import SystemClock
from scheduling.adapters.system_ids import RandomIds
from scheduling.config import ConfigurationError, Settings
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator


def load_settings(env: Mapping[str, str] | None = None) -> Settings | None:
    """Settings from ``env`` (default ``os.environ``); ``None`` after printing why not."""
    try:
        return Settings.from_env(os.environ if env is None else env)
    except ConfigurationError as exc:
        report(list(exc.details.get("problems", [exc.message])))
        return None


def system_edge() -> tuple[Clock, IdGenerator]:
    """The wall clock and random UUIDs: only CLI entry points construct these."""
    return SystemClock(), RandomIds()


def report(problems: list[str]) -> None:
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)


def configure_logging() -> None:
    logging.basicConfig(
        level=os.environ.get("AGENT_SCHEDULE_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
