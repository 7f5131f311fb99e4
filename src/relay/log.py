"""Logs as one line per event: an action name and key=value fields, or with
`log_format = "json"` one JSON object per line.

Fields are chosen by the code that logs them; request bodies, codes, keys and
secrets are never passed in, and phone numbers only as their last four digits.
The JSON form also enforces it on what it writes: fields named like a secret
are left out, and anything shaped like a phone number, an API key or a
webhook secret is masked, exception texts included.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from contextvars import ContextVar
from datetime import UTC, datetime
from itertools import filterfalse
from types import TracebackType
from typing import Any, TextIO

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's terminal-coloured duplicate of the message
    "taskName",
}

# The request a log line was written in: its id, and the account, verification or
# message it concerned once known. One dict per request, filled as the request goes.
_REQUEST: ContextVar[dict[str, Any] | None] = ContextVar("relay_log_request", default=None)

# Field names never written, whatever their value: `status_code` and `error_code` say
# how something ended and are kept.
_SECRET_NAMES = re.compile(
    r"(^|_)(code|codes|secret|secrets|key|keys|password|token|authorization|body)$", re.I
)
_KEPT = frozenset({"status_code", "error_code"})
_PHONE = re.compile(r"\+\d{4,11}(\d{4})\b")
_CREDENTIAL = re.compile(r"\b(sk_(?:test|live)|whsec)_[A-Za-z0-9_\-]+")


def begin_request(request_id: str) -> object:
    """Start a request's context; hand the returned token to `end_request`."""
    return _REQUEST.set({"request_id": request_id})


def end_request(token: object) -> None:
    _REQUEST.reset(token)  # type: ignore[arg-type]


def bind(**fields: Any) -> None:
    """Attach fields (account_id, verification_id, …) to the rest of this request's lines."""
    current = _REQUEST.get()
    if current is not None:
        current.update(fields)


def request_fields() -> dict[str, Any]:
    return dict(_REQUEST.get() or {})


def masked(text: str) -> str:
    """Phone numbers as their last four digits; API keys and webhook secrets as their kind."""
    return _CREDENTIAL.sub(r"\1_[redacted]", _PHONE.sub(r"…\1", text))


class KeyValueFormatter(logging.Formatter):
    # Every request writes a line: its second's text is made once per second.
    _second: tuple[int, str] = (-1, "")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A record's own fields by its attributes' names in order: the lines of one call
        # site have the same names, so they are picked out once per site, not per line.
        self._fields_of: dict[tuple[str, ...], tuple[str, ...]] = {}

    def format(self, record: logging.LogRecord) -> str:
        attributes = record.__dict__
        layout = tuple(attributes)
        names = self._fields_of.get(layout)
        if names is None:
            # What logging's record does not hold; `filterfalse` picks them out without a
            # step of Python for each of the record's attributes.
            names = tuple(filterfalse(_STANDARD.__contains__, layout))
            if len(self._fields_of) < _LAYOUTS_KEPT:
                self._fields_of[layout] = names
        stamp = self.formatTime(record)
        line = f"{stamp} {record.levelname.lower()} {record.name} {record.getMessage()}"
        if names:
            line += " " + " ".join([f"{key}={attributes[key]}" for key in names])
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """As logging's own (local time, milliseconds), its second's text kept."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, record.msecs)

    def stamp(self, created: float, msecs: float) -> str:
        """The time stamp of a line made at `created` (seconds) and `msecs` past its second."""
        second = int(created)
        kept, text = self._second
        if kept != second:
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (second, text)
        msec_format = self.default_msec_format
        if msec_format == _MSEC_FORMAT:
            return text + _MSECS[int(msecs)]
        return text if msec_format is None else msec_format % (text, msecs)


# Distinct layouts of records kept (`KeyValueFormatter._fields_of`): the log's call sites
# are few; past this, a layout's fields are picked out for each of its lines.
_LAYOUTS_KEPT = 1024
# logging's own milliseconds after the second's text, each written once.
_MSEC_FORMAT = "%s,%03d"
_MSECS = tuple(f",{msecs:03d}" for msecs in range(1000))

# The handler `configure` set up: `relay.access_line` writes to its stream directly.
_configured: logging.StreamHandler[TextIO] | None = None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, action, then the line's fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {**request_fields(), **record.__dict__}
        exception = self.formatException(record.exc_info) if record.exc_info else None
        return json_line(
            record.created, record.levelname, record.name, record.getMessage(), fields, exception
        )


def json_line(
    created: float,
    level: str,
    name: str,
    action: str,
    fields: dict[str, Any],
    exception: str | None,
) -> str:
    """A JSON log line: its time, level, logger and action, then `fields` that are not
    logging's record's own, none named like a secret, each masked."""
    entry: dict[str, Any] = {
        "time": datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds"),
        "level": level.lower(),
        "logger": name,
        "action": masked(action),
    }
    for key, value in fields.items():
        if key in _STANDARD or key in entry:
            continue
        if key not in _KEPT and _SECRET_NAMES.search(key):
            continue
        entry[key] = _safe(value)
    if exception is not None:
        entry["exception"] = masked(exception)
    return orjson.dumps(entry, default=str).decode()


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return masked(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return masked(str(value))


def configure(level: str = "info", log_format: str = "text") -> None:
    """Every log line to stderr, in `log_format`. In JSON mode, what would otherwise
    print text of its own becomes a log line too: Python's warnings, an exception
    nothing caught (in any thread), and the lines `tell` writes."""
    # No line shows a thread's or a process's name or id: not looked up for each one.
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    global _configured
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else KeyValueFormatter())
    _configured = handler
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.captureWarnings(log_format == "json")
    if log_format == "json":
        sys.excepthook = _uncaught
        threading.excepthook = _uncaught_in_thread


def configured_handler() -> logging.StreamHandler[TextIO] | None:
    """The handler `configure` last set up, if any."""
    return _configured


def json_lines() -> bool:
    """Whether the log is configured as one JSON object per line."""
    return any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger().handlers)


def tell(
    line: str, *, action: str, level: int = logging.INFO, stream: TextIO | None = None
) -> None:
    """A line for whoever runs Relay (`relay: warning: …`, `Relay worker stopped`): printed
    as it is to `stream` (stderr by default) with text logs; with JSON logs, a log line
    named `action` whose `detail` is the line, so that every line stays JSON."""
    if json_lines():
        detail = line.removeprefix("relay: ")
        logging.getLogger("relay").log(level, action, extra={"detail": detail})
        return
    print(line, file=stream or sys.stderr, flush=True)


def _uncaught(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    logging.getLogger("relay").critical("relay.uncaught_exception", exc_info=(kind, error, trace))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or args.exc_type is SystemExit:
        return
    logging.getLogger("relay").critical(
        "relay.uncaught_exception",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        extra={"in_thread": getattr(args.thread, "name", None)},
    )
