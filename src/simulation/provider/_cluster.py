"""An ephemeral PostgreSQL cluster: initdb, start, stop, and leftovers swept.

Runs inside the watchdog process (stdlib only, so the watchdog starts fast). As root
the server runs as an unprivileged user, because PostgreSQL refuses to run as root;
every server child gets ``PR_SET_PDEATHSIG`` so it dies with the watchdog.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from simulation.provider._binaries import Binaries, parse_version
from simulation.provider._info import SHM_DIR, on_shm

PREFIX = "scheduling-pg-"
BASE_DIR_ENV = "SCHEDULING_PG_DIR"
SHM_MIN_FREE = 1 << 30
OWNER_FILE = "owner.json"
DURABILITY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
# The durable lane (checks that claim a commit survives a server crash): every
# setting that trades crash safety for speed back on.
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
PORT_ATTEMPTS = 5
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
_PR_SET_PDEATHSIG = 1
_IPC_RMID = 0

_libc: Any = None
if sys.platform.startswith("linux"):
    # Resolved before any fork: the preexec hook must not load libraries.
    _libc = ctypes.CDLL(None, use_errno=True)


class ClusterError(RuntimeError):
    """The cluster could not be initialised or started (the message carries the log)."""


@dataclass(frozen=True)
class RunAs:
    """The unprivileged account the server runs as when the harness is root."""

    name: str
    uid: int
    gid: int


def server_account() -> RunAs | None:
    """``postgres`` (else ``nobody``) when we are root; ``None`` means "run as ourselves"."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return RunAs(name, entry.pw_uid, entry.pw_gid)
    raise ClusterError("running as root but neither user 'postgres' nor 'nobody' exists")


def base_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where cluster directories go.

    ``SCHEDULING_PG_DIR`` when set; else ``/dev/shm`` when it is writable and has
    room (tmpfs: initdb and clones are much faster; containers often mount only
    64 MiB there, too little for a cluster and its clones); else the temp dir.
    """
    env = os.environ if environ is None else environ
    if env.get(BASE_DIR_ENV):
        return Path(env[BASE_DIR_ENV])
    if SHM_DIR.is_dir() and os.access(SHM_DIR, os.W_OK | os.X_OK):
        stats = os.statvfs(SHM_DIR)
        if stats.f_bavail * stats.f_frsize >= SHM_MIN_FREE:
            return SHM_DIR
    return Path(tempfile.gettempdir())


def _child_setup(run_as: RunAs | None, parent: int, death_signal: int) -> Callable[[], None]:
    def setup() -> None:
        if run_as is not None:
            os.setgroups([])
            os.setgid(run_as.gid)
            os.setuid(run_as.uid)
        if _libc is not None:
            # After the uid change: the kernel clears the death signal on credential changes.
            _libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
            if os.getppid() != parent:  # the watchdog died before prctl took effect
                os._exit(1)

    return setup


def _process_start(pid: int) -> str | None:
    """An identity for the live process ``pid`` (kernel start time on Linux), else None.

    Comparing start times guards against a recycled pid.
    """
    if Path("/proc/self/stat").exists():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        # A zombie has exited: only its parent has not reaped it yet.
        return None if fields[0] in ("Z", "X") else fields[19]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return "alive"


def _processes_in(data: Path) -> list[int]:
    """Every process whose working directory is ``data``: PostgreSQL's postmaster and
    all its children chdir there, so this finds backends orphaned by a killed postmaster.
    """
    target = os.path.realpath(data)
    found: list[int] = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, ValueError):
            if os.readlink(entry / "cwd") == target:
                found.append(int(entry.name))
    return found


def _kill_processes_in(data: Path, timeout: float = STOP_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while (pids := _processes_in(data)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def _release_shared_memory(data: Path) -> None:
    """After an unclean stop, drop the SysV segment named in ``postmaster.pid``."""
    pid_file = data / "postmaster.pid"
    with contextlib.suppress(OSError, IndexError, ValueError):
        key, shmid = (int(v) for v in pid_file.read_text().splitlines()[6].split()[:2])
        # Only if key and id still match: an id freed earlier may belong to someone else now.
        segments = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        if _libc is not None and any(
            line.split()[:2] == [str(key), str(shmid)] for line in segments
        ):
            _libc.shmctl(shmid, _IPC_RMID, None)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Cluster:
    """One initdb'd data directory under ``root`` and the postmaster serving it."""

    def __init__(self, root: Path, binaries: Binaries, environ: Mapping[str, str]) -> None:
        self.root = root
        self.binaries = binaries
        self.data = root / "data"
        self.sockets = root / "sock"
        self.log_path = root / "postgres.log"
        self.run_as = server_account()
        self.env = binaries.env(environ)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.version = ""
        self.version_num = 0
        self.durability = dict(DURABILITY)

    def _run(self, args: list[str], log: IO[bytes], death_signal: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            cwd=self.root,
            close_fds=True,
            preexec_fn=_child_setup(self.run_as, os.getpid(), death_signal),
        )

    def _prepare(self) -> None:
        for path in (self.data, self.sockets):
            path.mkdir(mode=0o700)
            if self.run_as is not None:
                os.chown(path, self.run_as.uid, self.run_as.gid)

    def _version(self) -> None:
        with self.log_path.open("ab") as log:
            proc = self._run([str(self.binaries.bindir / "postgres"), "-V"], log, signal.SIGKILL)
            code = proc.wait(timeout=30)
        if code != 0:
            who = self.run_as.name if self.run_as else "this user"
            raise ClusterError(
                f"{self.binaries.bindir}/postgres -V failed as {who} (are the binaries"
                f" readable and executable by that user?):\n{_tail(self.log_path)}"
            )
        self.version, self.version_num = parse_version(_tail(self.log_path))

    def initdb(self) -> None:
        """initdb: trust auth, superuser ``postgres``, UTF8, C locale, no fsync."""
        self._prepare()
        self._version()
        args = [
            str(self.binaries.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",
        ]
        if self.version_num >= 130000:
            args.append("--no-instructions")
        with self.log_path.open("ab") as log:
            code = self._run(args, log, signal.SIGKILL).wait(timeout=300)
        if code != 0:
            raise ClusterError(f"initdb failed ({code}):\n{_tail(self.log_path)}")

    def _settings(self) -> dict[str, str]:
        on_tmpfs = on_shm(self.root)
        settings = dict(self.durability)
        settings.update(
            {
                # mmap segments live in the data directory, so they go when it does.
                "dynamic_shared_memory_type": "mmap" if on_tmpfs else "posix",
                "max_connections": "200",
                "TimeZone": "UTC",
                "wal_level": "minimal",
                "max_wal_senders": "0",
            }
        )
        return settings

    def start(self, port: int | None = None) -> None:
        """Start the postmaster on 127.0.0.1, retrying on a port clash (on ``port``
        only, without retries, when given: a restart keeps the clients' URLs)."""
        for _attempt in range(1 if port else PORT_ATTEMPTS):
            self.port = port or _free_port()
            args = [
                str(self.binaries.bindir / "postgres"),
                "-D",
                str(self.data),
                "-k",
                str(self.sockets),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
            ]
            for name, value in self._settings().items():
                args += ["-c", f"{name}={value}"]
            with self.log_path.open("ab") as log:
                # SIGINT is PostgreSQL's fast shutdown: it still cleans its own resources.
                self.proc = self._run(args, log, signal.SIGINT)
            if self._wait_ready():
                return
            log_text = _tail(self.log_path)
            if "could not bind" not in log_text and "Address already in use" not in log_text:
                raise ClusterError(f"postgres did not start:\n{log_text}")
        raise ClusterError(f"no free port after {PORT_ATTEMPTS} attempts:\n{_tail(self.log_path)}")

    def _wait_ready(self) -> bool:
        assert self.proc is not None
        pid_file = self.data / "postmaster.pid"
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                lines = pid_file.read_text().splitlines()
                if len(lines) >= 8 and lines[7].strip() == "ready":
                    return True
            time.sleep(0.002)
        self.stop()
        raise ClusterError(f"postgres not ready after {READY_TIMEOUT}s:\n{_tail(self.log_path)}")

    def info(self, source: str) -> dict[str, Any]:
        """The ServerInfo fields for this cluster."""
        return {
            "source": source,
            "version": self.version,
            "version_num": self.version_num,
            "dsn": f"postgresql://postgres@127.0.0.1:{self.port}/postgres",
            "durability": dict(self.durability),
            "binaries": str(self.binaries.bindir),
            "cluster_dir": str(self.root),
            "postmaster_pid": self.proc.pid if self.proc else None,
        }

    def stop(self) -> None:
        """Fast shutdown; SIGKILL every process of the cluster after a timeout."""
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # After a clean shutdown there is nothing left; after a killed postmaster its
        # children are orphans that still hold the shared memory.
        _kill_processes_in(self.data)
        _release_shared_memory(self.data)
        self.proc = None


def make_root(base: Path) -> Path:
    """A fresh cluster directory the server user can traverse, stamped with its owner.

    It is filled under a hidden name and renamed, so a sweeper never sees one
    without its owner file.
    """
    staging = Path(tempfile.mkdtemp(prefix="." + PREFIX, dir=base))
    staging.chmod(0o755)
    owner = {"pid": os.getpid(), "start": _process_start(os.getpid())}
    (staging / OWNER_FILE).write_text(json.dumps(owner))
    root = base / staging.name[1:]
    staging.rename(root)
    return root


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)


def owner_alive(root: Path) -> bool:
    """Whether the watchdog that made ``root`` is still running."""
    try:
        owner = json.loads((root / OWNER_FILE).read_text())
        pid = int(owner["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    now = _process_start(pid)
    return now is not None and now == owner.get("start")


def sweep_stale(base: Path) -> list[Path]:
    """Remove cluster directories whose watchdog is gone (it was itself SIGKILLed)."""
    removed: list[Path] = []
    for root in base.glob(PREFIX + "*"):
        if owner_alive(root):
            continue
        _kill_processes_in(root / "data")
        _release_shared_memory(root / "data")
        remove_root(root)
        removed.append(root)
    return removed
