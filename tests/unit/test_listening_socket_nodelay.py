"""Sockets we bind ourselves get TCP_NODELAY on every accepted connection (ADR 2320).

asyncio sets TCP_NODELAY on a transport's socket only when the socket's ``proto`` says
TCP; a socket made with proto 0 leaves Nagle on, and every response split in two writes
waited out the client's delayed ACK (~45 ms a request, seen in the benchmark at
``--workers 2``). The test of the test: a proto-0 socket's connection stays without."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import pytest

from scheduling.cli.lifetime import listening_socket


def nodelay_after_asyncio(make: Callable[[], socket.socket]) -> int:
    with make() as server, socket.create_connection(server.getsockname()[:2]) as _client:
        conn, _ = server.accept()
        with conn:
            asyncio.base_events._set_nodelay(conn)  # type: ignore[attr-defined]
            return conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def proto_zero() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def test_the_workers_socket_gets_nodelay() -> None:
    assert nodelay_after_asyncio(lambda: listening_socket("127.0.0.1", 0)) != 0


def test_a_proto_zero_socket_would_not() -> None:
    assert nodelay_after_asyncio(proto_zero) == 0


@pytest.mark.parametrize("host", ["127.0.0.1"])
def test_the_socket_listens_where_asked(host: str) -> None:
    with listening_socket(host, 0) as sock:
        assert sock.getsockname()[0] == host
        assert sock.proto == socket.IPPROTO_TCP
