"""What a provider reports about the server it handed out, and how it fails."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit, urlunsplit

# tmpfs: initdb, clones and FILE_COPY checkpoints are much faster here than on disk.
SHM_DIR = Path("/dev/shm")  # noqa: S108 - we make private subdirectories, never fixed names

Source = Literal["url", "local", "embedded", "docker"]
SOURCES: tuple[Source, ...] = ("url", "local", "embedded", "docker")


class ProviderUnavailable(RuntimeError):
    """No PostgreSQL server could be provided; the message says what to install or set."""


@dataclass(frozen=True)
class ServerInfo:
    """Which source ran, the server version and durability settings (for reports).

    ``dsn`` is the admin libpq URL (``postgresql://postgres@127.0.0.1:PORT/postgres``
    for an ephemeral cluster). ``binaries`` is the directory of the server binaries
    when the harness started the server itself. ``cluster_dir`` and ``postmaster_pid``
    are set only for an ephemeral cluster (they let tests prove cleanup).
    """

    source: Source
    version: str
    version_num: int
    dsn: str
    durability: dict[str, str] = field(default_factory=dict)
    binaries: str | None = None
    cluster_dir: str | None = None
    postmaster_pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def redacted(self) -> ServerInfo:
        """The same info with any password in ``dsn`` masked (for reports and logs)."""
        parts = urlsplit(self.dsn)
        if parts.password is None:
            return self
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
        return replace(self, dsn=urlunsplit(parts._replace(netloc=netloc)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServerInfo:
        source = data["source"]
        if source not in SOURCES:
            raise ValueError(f"unknown PostgreSQL source {source!r}; expected one of {SOURCES}")
        pid = data.get("postmaster_pid")
        return cls(
            source=cast(Source, source),
            version=str(data["version"]),
            version_num=int(data["version_num"]),
            dsn=str(data["dsn"]),
            durability={str(k): str(v) for k, v in dict(data.get("durability") or {}).items()},
            binaries=data.get("binaries"),
            cluster_dir=data.get("cluster_dir"),
            postmaster_pid=None if pid is None else int(pid),
        )


def async_url(url: str) -> str:
    """``postgresql://…`` -> ``postgresql+asyncpg://…`` (SQLAlchemy's async engine form)."""
    parts = urlsplit(url)
    if parts.scheme in ("postgresql", "postgres"):
        return urlunsplit(parts._replace(scheme="postgresql+asyncpg"))
    return url


def with_database(url: str, name: str) -> str:
    """The same server URL pointing at database ``name`` (query parameters kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def database_of(url: str) -> str:
    """The database name a libpq URL points at."""
    name = urlsplit(url).path.lstrip("/")
    if not name:
        raise ValueError(f"URL names no database: {url!r}")
    return name


def version_num_of(version: str) -> int:
    """``"15.18"`` -> ``150018`` (PostgreSQL's ``server_version_num`` scheme since 10)."""
    major, _, rest = version.partition(".")
    minor = rest.split(".")[0] if rest else "0"
    return int(major) * 10_000 + int("".join(ch for ch in minor if ch.isdigit()) or 0)


def on_shm(path: str | Path) -> bool:
    """Whether ``path`` lies under ``/dev/shm``."""
    return Path(path).is_relative_to(SHM_DIR)
