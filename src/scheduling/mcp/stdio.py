"""The stdio transport of the MCP edge: newline-delimited JSON-RPC on stdin/stdout.

A variant of the SDK's ``stdio_server`` that reads text the way the streamable HTTP
transport does, so every text reaches the pipeline's one validator (ADR 2112):

* a line is decoded as UTF-8 with ``surrogateescape`` (an invalid byte becomes a lone
  surrogate the text validator refuses as ``schedule.text.invalid``, instead of being
  silently replaced) and parsed by the standard ``json`` module, which accepts the
  escape ``"\\ud800"`` (the SDK's own parser rejects the whole message, so the caller
  never learns why);
* a line that is not a JSON-RPC message is answered with a JSON-RPC error when it
  carries a usable id, and otherwise dropped; the log line never quotes it; a line
  nested past the parser's limit is not JSON (arguments nested deeper than the edges
  accept reach the pipeline's text check, ``schedule.text.too_deep``);
* a response that cannot be encoded is replaced by an internal-error response;
* a line longer than ``MAX_LINE_BYTES`` (the HTTP transport's body limit) is dropped
  unread, as the HTTP transport refuses such a body;
* a closed stdin ends the session; a closed stdout (the client went away) ends it
  quietly, without a traceback, even while stdin stays open (stdin is read by a
  daemon thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

_log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1024 * 1024
"""The longest line read as a message: the streamable HTTP transport's body limit."""


def decode_line(raw: bytes) -> types.JSONRPCMessage | types.JSONRPCError | None:
    """The message on one line; a JSON-RPC error to answer; or ``None`` (drop it)."""
    text = raw.decode("utf-8", errors="surrogateescape").strip()
    if not text:
        return None
    try:
        document: Any = json.loads(text)
    except (ValueError, RecursionError):  # nested past the parser's own limit too
        _log.warning("stdio: a line that is not JSON was dropped (%d bytes)", len(raw))
        return None
    try:
        return types.JSONRPCMessage.model_validate(document)
    except (ValidationError, RecursionError):
        ident = document.get("id") if isinstance(document, dict) else None
        if isinstance(ident, str | int) and not isinstance(ident, bool):
            error = types.ErrorData(code=types.INVALID_REQUEST, message="Invalid request")
            return types.JSONRPCError(jsonrpc="2.0", id=ident, error=error)
        _log.warning("stdio: a line that is not a JSON-RPC message was dropped")
        return None


def encode_message(message: types.JSONRPCMessage) -> bytes:
    """One line of UTF-8 JSON; an unencodable response becomes an internal error."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_none=True)
        return text.encode("utf-8") + b"\n"
    except (ValueError, UnicodeError):  # pydantic's serialization error is a ValueError
        root = message.root
        ident = getattr(root, "id", None)
        _log.warning("stdio: an outgoing message could not be encoded")
        if not isinstance(ident, str | int):
            return b""
        error = types.ErrorData(code=types.INTERNAL_ERROR, message="Unencodable response")
        fallback = types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))
        return fallback.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"


def _lines(source: Any) -> asyncio.Queue[bytes | None]:
    """The lines of ``source``, read by a daemon thread (``None`` at the end). A blocked
    read cannot be cancelled; a daemon thread never keeps the process alive, so a session
    that ends while the client keeps stdin open (it stopped reading stdout) still exits."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def put(item: bytes | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is reading
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def pump() -> None:
        # os.read on the descriptor, not the buffered file: a daemon thread blocked
        # inside a buffered read holds its lock, and interpreter shutdown aborts on it.
        # Only the new chunk is searched for line ends, so a long line costs linear
        # time; one past MAX_LINE_BYTES is skipped to its end, never buffered whole.
        pending = bytearray()
        skipping = False
        try:
            fd = source.fileno()
            while chunk := os.read(fd, 65536):
                start = 0
                while (end := chunk.find(b"\n", start)) != -1:
                    if not skipping:
                        pending += chunk[start:end]
                        put(bytes(pending))
                    pending.clear()
                    skipping = False
                    start = end + 1
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > MAX_LINE_BYTES:
                        _log.warning("stdio: a line over %d bytes was dropped", MAX_LINE_BYTES)
                        pending.clear()
                        skipping = True
            if pending and not skipping:
                put(bytes(pending))
        except (OSError, ValueError):  # a closed or broken stdin is its end
            pass
        finally:
            put(None)

    threading.Thread(target=pump, name="mcp-stdin", daemon=True).start()
    return queue


@asynccontextmanager
async def stdio_transport(
    stdin: Any = None, stdout: Any = None
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """(read, write) streams for ``Server.run`` over binary ``stdin``/``stdout``
    (default: this process's standard streams)."""
    lines = _lines(stdin if stdin is not None else sys.stdin.buffer)
    sink = anyio.wrap_file(stdout if stdout is not None else sys.stdout.buffer)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    replies = write_stream.clone()  # the reader answers undecodable requests itself

    async def reader() -> None:
        async with read_writer, replies:
            try:
                while (raw := await lines.get()) is not None:
                    decoded = decode_line(raw)
                    if isinstance(decoded, types.JSONRPCError):
                        await replies.send(SessionMessage(types.JSONRPCMessage(decoded)))
                    elif decoded is not None:
                        await read_writer.send(SessionMessage(decoded))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                _log.debug("stdio: the session ended before stdin")

    async def writer(session: anyio.CancelScope) -> None:
        async with write_reader:
            try:
                async for message in write_reader:
                    line = encode_message(message.message)
                    if line:
                        await sink.write(line)
                        await sink.flush()
            except (BrokenPipeError, ConnectionError, ValueError):  # ValueError: closed file
                _log.info("stdio: the client closed stdout; ending the session")
                session.cancel()  # nobody reads the answers: end the session, quietly

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer, tg.cancel_scope)
        try:
            yield read_stream, write_stream
        finally:
            tg.cancel_scope.cancel()
