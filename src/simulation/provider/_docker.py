"""The last resort: testcontainers, only when Docker answers and the image is local.

Imported lazily (by the watchdog) so the ``docker`` extra stays optional. No registry
is reachable on our machines, so an image that is not already present is never pulled.
testcontainers' reaper removes the container if the watchdog dies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from simulation.provider._binaries import parse_version
from simulation.provider._cluster import DURABILITY

IMAGE_ENV = "SCHEDULING_DOCKER_IMAGE"
DEFAULT_IMAGE = "postgres:16-alpine"


def unavailable_reason(environ: Mapping[str, str]) -> str | None:
    """Why Docker cannot be used (``None`` when it can)."""
    try:
        docker: Any = importlib.import_module("docker")
    except ImportError:
        return "testcontainers is not installed (`pip install -e '.[docker]'`)"
    image = environ.get(IMAGE_ENV, DEFAULT_IMAGE)
    try:
        client = docker.from_env(timeout=3)
        try:
            client.ping()
            client.images.get(image)
        finally:
            client.close()
    except Exception as exc:
        return f"Docker is not usable ({type(exc).__name__}: {exc}); image {image} must be local"
    return None


def start(environ: Mapping[str, str]) -> tuple[dict[str, Any], Callable[[], None]]:
    """Start the container with durability off; return its ServerInfo fields and a stopper."""
    from testcontainers.postgres import PostgresContainer

    image = environ.get(IMAGE_ENV, DEFAULT_IMAGE)
    flags = " ".join(f"-c {name}={value}" for name, value in DURABILITY.items())
    container = PostgresContainer(
        image,
        username="postgres",
        password="postgres",  # noqa: S106 - a throwaway local container dbname="postgres", driver=None
    ).with_command(f"postgres {flags}")
    container.start()
    try:
        _code, output = container.exec("postgres -V")
        version, version_num = parse_version(output.decode())
        host = container.get_container_host_ip()
        port = container.get_exposed_port(5432)
    except Exception:
        container.stop()
        raise
    info = {
        "source": "docker",
        "version": version,
        "version_num": version_num,
        "dsn": f"postgresql://postgres:postgres@{host}:{port}/postgres",
        "durability": dict(DURABILITY),
        "binaries": None,
        "cluster_dir": None,
        "postmaster_pid": None,
    }
    return info, container.stop
