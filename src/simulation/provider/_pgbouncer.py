"""A pgbouncer (Debian package ``pgbouncer``, 1.18) in front of one PostgreSQL server,
owned by one soak or test.

``pgbouncer_in_front(host, port, pool_mode=...)`` writes a configuration into a fresh
temporary directory (every database of the server under the same name, trust
authentication, the admin console open to ``postgres``), starts ``pgbouncer`` in the
foreground on 127.0.0.1 as the provider's unprivileged server account (it refuses
root), waits until it accepts connections, and on exit stops it and removes the
directory. ``url_for(url)`` turns a server URL into the same database through the
pooler; ``admin_url`` is its admin console (``SHOW POOLS`` and friends).

``pool_mode`` is ``session`` (a server connection per client connection, for the
client's whole session: what the product supports), ``transaction`` (a server
connection per transaction: protocol-level prepared statements and LISTEN break,
which ``scheduling release-check`` detects and refuses) or ``statement``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from simulation.provider._cluster import (
    _child_setup,
    _free_port,
    _tail,
    base_directory,
    make_root,
    remove_root,
    server_account,
)
from simulation.provider._info import ProviderUnavailable

POOL_MODES = ("session", "transaction", "statement")
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
PGBOUNCER_PATHS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")


class PgbouncerError(RuntimeError):
    """pgbouncer did not start (the message carries its log)."""


def find_pgbouncer(environ: Mapping[str, str] | None = None) -> str | None:
    """The ``pgbouncer`` executable (PATH, then the sbin directories), or ``None``."""
    env = os.environ if environ is None else environ
    path = os.pathsep.join([env.get("PATH", os.defpath), *PGBOUNCER_PATHS])
    return shutil.which("pgbouncer", path=path)


@dataclass
class Pgbouncer:
    """A running pgbouncer: its port, pool mode, directory and process."""

    root: Path
    port: int
    pool_mode: str
    proc: subprocess.Popen[bytes]

    @property
    def log_path(self) -> Path:
        return self.root / "pgbouncer.log"

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/pgbouncer"

    def url_for(self, url: str) -> str:
        """``url`` (a libpq URL of the server behind) with host and port replaced by
        this pooler's; user, database and query parameters kept."""
        parts = urlsplit(url)
        user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{self.port}"))

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # pgbouncer: safe shutdown
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _config(root: Path, host: str, server_port: int, port: int, pool_mode: str) -> str:
    return "\n".join(
        [
            "[databases]",
            f"* = host={host} port={server_port}",
            "",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {root / 'userlist.txt'}",
            "admin_users = postgres",
            "stats_users = postgres",
            f"pool_mode = {pool_mode}",
            "max_client_conn = 1000",
            "default_pool_size = 100",
            "server_reset_query = DISCARD ALL",
            "server_check_delay = 0",
            # Default 15 s: after one failed server login (a restarting server) every
            # client is refused for that long (docs/operations/pgbouncer.md).
            "server_login_retry = 0.5",
            "ignore_startup_parameters = extra_float_digits",
            f"logfile = {root / 'pgbouncer.log'}",
            f"pidfile = {root / 'pgbouncer.pid'}",
            "",
        ]
    )


def _accepting(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def pgbouncer_in_front(
    host: str,
    port: int,
    *,
    pool_mode: str = "session",
    users: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Iterator[Pgbouncer]:
    """A started pgbouncer forwarding every database to ``host:port``; ``postgres`` and
    ``users`` may log in (trust: pgbouncer still wants each name in its user list).
    Raises ``ProviderUnavailable`` when pgbouncer is not installed."""
    if pool_mode not in POOL_MODES:
        raise ValueError(f"pool_mode must be one of {POOL_MODES}, not {pool_mode!r}")
    env = os.environ if environ is None else environ
    executable = find_pgbouncer(env)
    if executable is None:
        raise ProviderUnavailable("pgbouncer not found: install the Debian package pgbouncer")
    root = make_root(base_directory(env))
    proc: subprocess.Popen[bytes] | None = None
    try:
        account = server_account()
        if account is not None:
            os.chown(root, account.uid, account.gid)
        names = ["postgres", *(u for u in users if u != "postgres")]
        (root / "userlist.txt").write_text(
            "".join(f'"{name}" ""\n' for name in names), encoding="utf-8"
        )
        for _attempt in range(5):
            listen = _free_port()
            config = root / "pgbouncer.ini"
            config.write_text(_config(root, host, port, listen, pool_mode), encoding="utf-8")
            with (root / "stdout.log").open("ab") as log:
                proc = subprocess.Popen(
                    [executable, str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={k: env[k] for k in ("PATH", "TZ") if k in env},
                    cwd=root,
                    close_fds=True,
                    preexec_fn=_child_setup(account, os.getpid(), signal.SIGINT),
                )
            deadline = time.monotonic() + READY_TIMEOUT
            while proc.poll() is None and not _accepting(listen):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            if proc.poll() is None and _accepting(listen):
                break
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            text = _tail(root / "pgbouncer.log") + _tail(root / "stdout.log")
            if "Address already in use" not in text:
                raise PgbouncerError(f"pgbouncer did not start:\n{text}")
        else:
            raise PgbouncerError("pgbouncer found no free port")
        bouncer = Pgbouncer(root, listen, pool_mode, proc)
        yield bouncer
    finally:
        if proc is not None and proc.poll() is None:
            Pgbouncer(root, 0, pool_mode, proc).stop()
        remove_root(root)
