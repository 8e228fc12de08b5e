"""What the MCP SDK may log from this process (ADR 2112).

* A client that goes away mid-call (a closed SSE stream, a broken pipe, a session
  deleted while its stream is open) is normal for a network edge, but the SDK logs some
  of those paths with ``logger.exception``. ``DisconnectFilter`` drops exactly those
  records (an exception of a disconnect class) from the SDK's loggers and writes one
  debug line instead: no traceback reaches the logs for a disconnect, every other
  error still does.
* The SDK's debug records carry whole protocol messages (tool arguments: an
  instruction, a pasted credential), so its loggers never go below INFO.
* A message the SDK's session cannot validate (a request whose id is null, a float or
  missing is taken for a notification) is logged on the *root* logger at WARNING with
  the message itself, or with pydantic's error, which quotes input values.
  ``SdkMessageFilter`` keeps such a record's level and first words, never the message.
"""

from __future__ import annotations

import logging

import anyio

# The SDK modules that log a client's disconnect as an error.
SDK_LOGGERS = (
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "mcp.server.lowlevel.server",
    "mcp.shared.session",
    "mcp.server.stdio",
)
DISCONNECTS: tuple[type[BaseException], ...] = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    ConnectionError,  # BrokenPipeError, ConnectionResetError, ...
)

_log = logging.getLogger(__name__)


def is_disconnect(error: BaseException | None) -> bool:
    """``error`` or, for an exception group, every leaf is a disconnect."""
    if error is None:
        return False
    if isinstance(error, BaseExceptionGroup):
        return all(is_disconnect(e) for e in error.exceptions)
    return isinstance(error, DISCONNECTS)


class DisconnectFilter(logging.Filter):
    """Drops a record whose exception is a client disconnect (see the module doc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if is_disconnect(error):
            _log.debug("MCP client disconnected (%s in %s)", type(error).__name__, record.name)
            return False
        return True


_FILTER = DisconnectFilter()

SDK_SESSION_MODULE = "mcp/shared/session.py"
"""The SDK module that logs unvalidated messages through the root logger."""


class SdkMessageFilter(logging.Filter):
    """Rewrites the SDK session's root-logger records to their first words (see the
    module doc): "Failed to validate request" stays, the message and the error go."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "root" and record.pathname.replace("\\", "/").endswith(
            SDK_SESSION_MODULE
        ):
            head = str(record.msg).split(":", 1)[0]
            record.msg = f"MCP SDK: {head} (the message is not logged)"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


_SDK_MESSAGES = SdkMessageFilter()


def quiet_sdk_logs() -> None:
    """Install the filter on the SDK's loggers and keep them at INFO or above
    (idempotent)."""
    sdk = logging.getLogger("mcp")
    if sdk.getEffectiveLevel() < logging.INFO:
        sdk.setLevel(logging.INFO)
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    root = logging.getLogger()
    if _SDK_MESSAGES not in root.filters:
        root.addFilter(_SDK_MESSAGES)
