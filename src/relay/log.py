"""Logs as one line per event: an action name and key=value fields.

Fields are chosen by the code that logs them; request bodies, codes, keys and
secrets are never passed in, and phone numbers only as their last four digits.
"""

from __future__ import annotations

import logging
import sys

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's terminal-coloured duplicate of the message
}


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(
            f"{key}={value}" for key, value in record.__dict__.items() if key not in _STANDARD
        )
        stamp = self.formatTime(record)
        line = f"{stamp} {record.levelname.lower()} {record.name} {record.getMessage()}"
        if fields:
            line += " " + fields
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
