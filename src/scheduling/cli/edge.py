"""What a process edge supplies: settings from the real environment, the system clock
and random ids, and a uniform way to print a refusal."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from scheduling import logs
from scheduling.adapters.system_clock import SystemClock
from scheduling.adapters.system_ids import RandomIds
from scheduling.config import ConfigurationError, ProcessSettings, Settings
from scheduling.instance import declare
from scheduling.ports.clock import Clock
from scheduling.ports.ids import IdGenerator

INSTANCE_ID_LIMIT = 40
"""``scheduling.instance.INSTANCE_ID_PATTERN``'s length bound."""


def load_settings(env: Mapping[str, str] | None = None) -> Settings | None:
    """Settings from ``env`` (default ``os.environ``); ``None`` after printing why not."""
    try:
        return Settings.from_env(os.environ if env is None else env)
    except ConfigurationError as exc:
        report(list(exc.details.get("problems", [exc.message])))
        return None


TOKENS_ENV = "AGENT_SCHEDULE_API_TOKENS_FILE"


def tokens_path(flag: str | None, settings: Settings) -> Path | None:
    """The bearer-token file ``serve`` and ``mcp`` read (``--tokens-file``, else
    ``AGENT_SCHEDULE_API_TOKENS_FILE``); ``None`` when unset, or missing in production
    (each edge reports it with its own code)."""
    raw = flag or os.environ.get(TOKENS_ENV)
    path = Path(raw) if raw else None
    if path is None or (settings.production and not path.is_file()):
        return None
    return path


def system_edge() -> tuple[Clock, IdGenerator]:
    """The wall clock and random UUIDs: only CLI entry points construct these."""
    return SystemClock(), RandomIds()


def report(problems: list[str]) -> None:
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)


def configure_logging(role: str | None = None, *, worker: int | None = None) -> None:
    """Declare this process's identity (``role``, default the subcommand's name, and
    ``AGENT_SCHEDULE_INSTANCE_ID``) and write its log to stderr: UTC timestamps, role
    and instance id on every line, text or JSON (``AGENT_SCHEDULE_LOG_FORMAT``),
    repeated failures once with a count (ADRs 2270, 2271). A value that does not parse
    is a refusal (exit 1), like the other settings.

    ``worker`` (``serve --workers N``'s child ``i``): each worker is its own instance; the
    default id (``<host>-<pid>``) already differs, a configured one gets ``-w<i>``."""
    try:
        chosen = ProcessSettings.from_env(os.environ)
    except ConfigurationError as exc:
        report(list(exc.details.get("problems", [exc.message])))
        raise SystemExit(1) from None
    declare(role or _command_name(sys.argv), worker_instance_id(chosen.instance_id, worker))
    logs.configure(
        sys.stderr,
        kind=chosen.log_format,
        level=chosen.log_level,
        repeat_window_seconds=chosen.log_repeat_window_seconds,
    )


def worker_instance_id(configured: str | None, worker: int | None) -> str | None:
    """A configured instance id made distinct per worker, within the id's 40 characters."""
    if configured is None or worker is None:
        return configured
    suffix = f"-w{worker}"
    return configured[: INSTANCE_ID_LIMIT - len(suffix)] + suffix


def _command_name(argv: list[str]) -> str:
    """The subcommand (``scheduling scheduler`` -> ``scheduler``), else the program."""
    chosen = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
    program = Path(argv[0]).stem if argv else ""
    return chosen or (program if program and not program.startswith("-") else "process")
