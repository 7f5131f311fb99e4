"""A request's access line (`http.request` on `relay.http`), written straight to the
stream of the handler `relay.log.configure` set up, as that handler would write it.

Only while that handler is the one place the line would go: a handler or filter added
anywhere on the logger's way up (pytest's `caplog`, an embedding application's own), a
record factory other than logging's, or a formatter other than Relay's sends the line
through logging as any other.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from relay.log import (
    JsonFormatter,
    KeyValueFormatter,
    configured_handler,
    json_line,
    request_fields,
)

_ACTION = "http.request"


def written(
    logger: logging.Logger, request_id: str, method: str, path: str, status: int, duration_ms: float
) -> bool:
    """Whether the line was written here; if not, the caller logs it through `logger`.
    The caller has checked `logger.isEnabledFor(logging.INFO)`."""
    handler = _sole_handler(logger)
    if handler is None:
        return False
    formatter = handler.formatter
    # As logging's record takes its time (Python 3.11): `created`, and `msecs` from it.
    created = time.time()
    if type(formatter) is KeyValueFormatter and formatter.datefmt is None:
        msecs = int((created - int(created)) * 1000) + 0.0
        line = (
            f"{formatter.stamp(created, msecs)} info {logger.name} {_ACTION}"
            f" request_id={request_id} method={method} path={path}"
            f" status={status} duration_ms={duration_ms}"
        )
    elif type(formatter) is JsonFormatter:
        fields: dict[str, Any] = {
            **request_fields(),
            "request_id": request_id,
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
        }
        line = json_line(created, "INFO", logger.name, _ACTION, fields, None)
    else:
        return False
    # As `StreamHandler.emit` under `Handler.handle`: one write of the line under the
    # handler's lock, so it never interleaves with another line on the same stream.
    handler.acquire()
    try:
        stream = handler.stream
        stream.write(line + handler.terminator)
        stream.flush()
    except Exception:
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, _ACTION, (), None)
        handler.handleError(record)
    finally:
        handler.release()
    return True


def _sole_handler(logger: logging.Logger) -> logging.StreamHandler[Any] | None:
    """Relay's own handler when it is the only thing that would see an INFO record of
    `logger`, else None."""
    own = configured_handler()
    if (
        own is None
        or logger.disabled
        or own.filters
        or own.level > logging.INFO
        or logging.getLogRecordFactory() is not logging.LogRecord
    ):
        return None
    # Up to the first logger with handlers or filters of its own: it must be the root
    # (nothing above it) and hold only Relay's handler, unfiltered.
    node = logger
    while node.propagate and not node.handlers and not node.filters:
        parent = node.parent
        if parent is None:
            return None
        node = parent
    if node.parent is not None or node.filters or node.handlers != [own]:
        return None
    return own
