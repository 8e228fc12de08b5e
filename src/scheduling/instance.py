"""Which process this is: its role and instance id, and the ``application_name`` its
PostgreSQL connections carry (issue 25 item 3, ADR 2270).

An operator reading ``pg_stat_activity`` or a log line must be able to tell which
process did the work. Every connection the product opens is named
``<role>@<instance id>`` (``application_name``; the role is the storage role whose
engine it is: ``api``, ``scheduler``, ``run_worker``, ``maintenance``, ``trusted``, or
``migrate``), and every log line carries the process's role and the same instance id,
so the instance id joins the two.

The instance id is ``AGENT_SCHEDULE_INSTANCE_ID`` when configured (letters, digits,
``.``, ``_``, ``-``; at most 40 characters), else ``<short hostname>-<pid>``: stable for
the life of the process, the same names ``ps``/``top``/the orchestrator show, and read
from neither the wall clock nor a random source (the simulator's determinism rests on
the ``Clock`` and ``IdGenerator`` ports only). The process edge declares the identity
once (``declare``); code that runs without an edge (tests, the harness, a library
caller) gets the default. A forked child recomputes the default for its own pid.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

INSTANCE_ID_ENV = "AGENT_SCHEDULE_INSTANCE_ID"
INSTANCE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"
"""What a configured instance id may hold: ASCII (PostgreSQL turns anything else in an
``application_name`` into ``?``) and short enough to leave room for the role."""

APPLICATION_NAME_BYTES = 63
"""PostgreSQL keeps ``NAMEDATALEN - 1`` bytes of an ``application_name``."""

UNDECLARED_ROLE = "process"
"""The role of a process whose edge declared none (tests, the harness, a library)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_INSTANCE_ID = re.compile(INSTANCE_ID_PATTERN)


@dataclass(frozen=True)
class ProcessIdentity:
    role: str
    """The process's role (``scheduler``, ``run-worker``, ``serve``, ``mcp``, ...)."""
    instance_id: str

    def application_name(self, role: str | None = None) -> str:
        """The ``application_name`` of a connection ``role`` opens in this process."""
        return application_name(role or self.role, self.instance_id)


def valid_instance_id(value: str) -> bool:
    return _INSTANCE_ID.match(value) is not None


def default_instance_id(hostname: str, pid: int) -> str:
    """``<short hostname>-<pid>``, reduced to the characters an instance id may hold."""
    host = _UNSAFE.sub("-", hostname.split(".", 1)[0]).strip("-._")[:24] or "host"
    return f"{host}-{pid}"


def application_name(role: str, instance_id: str) -> str:
    """``<role>@<instance id>``, ASCII, within PostgreSQL's 63 bytes."""
    name = f"{_UNSAFE.sub('-', role)}@{_UNSAFE.sub('-', instance_id)}"
    return name[:APPLICATION_NAME_BYTES]


def server_settings(role: str) -> dict[str, str]:
    """asyncpg's ``server_settings`` naming a connection ``role`` opens in this process."""
    return {"application_name": current().application_name(role)}


# ----------------------------------------------------------- the process's identity


@dataclass(frozen=True)
class _Declaration:
    role: str
    configured_id: str | None


_declared: _Declaration | None = None


def declare(role: str, instance_id: str | None = None) -> ProcessIdentity:
    """Set this process's identity (the process edge, once, before opening anything);
    ``instance_id`` is the configured one (``None``: the default)."""
    global _declared
    if instance_id is not None and not valid_instance_id(instance_id):
        raise ValueError(f"instance id {instance_id!r} does not match {INSTANCE_ID_PATTERN}")
    _declared = _Declaration(role, instance_id)
    return current()


def current() -> ProcessIdentity:
    """The declared identity, else ``process`` with the default instance id. The
    default is computed for the calling pid, so a forked child has its own."""
    role = UNDECLARED_ROLE if _declared is None else _declared.role
    configured = None if _declared is None else _declared.configured_id
    return ProcessIdentity(role, configured or _default_instance_id())


_default: tuple[int, str] | None = None
"""(pid, the default instance id computed for it)."""


def _default_instance_id() -> str:
    # Computed once per process, so it is stable for the life of the process (a host
    # renamed later does not rename it) and a log line pays no ``gethostname`` call; a
    # forked child has another pid, so it computes its own.
    global _default
    pid = os.getpid()
    if _default is None or _default[0] != pid:
        _default = (pid, default_instance_id(socket.gethostname(), pid))
    return _default[1]
