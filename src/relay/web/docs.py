"""Human-readable pages the service serves itself: the API reference and error codes."""

from __future__ import annotations

import html

from relay import errors as e
from relay.carriers.routing import ERROR_MESSAGES
from relay.web.error_guide import GUIDE
from relay.web.errors import status_and_type

# The console's stylesheet: the pages' Content-Security-Policy (relay.web.middleware)
# allows styles from this server's files only, never inline.
STYLESHEET = "/console/static/console.css"


def _subclasses(cls: type[e.RelayError]) -> list[type[e.RelayError]]:
    found: list[type[e.RelayError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def catalogue() -> list[tuple[int, str, str, str]]:
    """Every error code Relay can answer with: (HTTP status, type, code, meaning).

    Only classes that name their own code count: a grouping class such as
    VerificationClosed inherits `internal_error` without ever being raised.
    """
    rows: dict[str, tuple[int, str, str, str]] = {}
    classes: list[type[e.RelayError]] = [e.InternalError, *_subclasses(e.RelayError)]
    for cls in classes:
        if "code" not in vars(cls):
            continue
        status, kind = status_and_type(cls.__new__(cls))
        rows.setdefault(cls.code, (status, kind, cls.code, cls.default_message))
    return sorted(rows.values())


def inline(text: str) -> str:
    """Escaped, with `backticks` as <code>: the descriptions are written in Markdown style."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{STYLESHEET}"><body><main>'
        f"<h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )


def errors_page() -> str:
    rows = "".join(
        f"<tr id='{code}'><td><code>{code}</code></td><td>{status}</td>"
        f"<td><code>{kind}</code></td><td>{inline(GUIDE[code][0])}</td>"
        f"<td>{inline(GUIDE[code][1])}</td></tr>"
        for status, kind, code, _ in catalogue()
    )
    intro = (
        '<p>Every failure answers with <code>{"error": {"type", "code", "message", '
        '"param", "doc_url"}}</code>. <code>param</code> names the field at fault, when one '
        "is. 429 answers carry <code>Retry-After</code>.</p>"
    )
    table = (
        "<table><tr><th>code</th><th>HTTP</th><th>type</th><th>cause</th><th>fix</th></tr>"
        f"{rows}</table>"
    )
    attempt_rows = "".join(
        f"<tr id='{code}'><td><code>{code}</code></td><td>{html.escape(text)}</td></tr>"
        for code, text in ERROR_MESSAGES.items()
    )
    attempts = (
        "<h2>Attempt errors</h2><p>A failed SMS attempt carries <code>error</code> with "
        "<code>type: carrier_error</code>, one of these codes, and <code>carrier_code</code>, "
        "the carrier's own code when it gave one.</p>"
        f"<table><tr><th>code</th><th>meaning</th></tr>{attempt_rows}</table>"
    )
    return page("Relay error codes", intro + table + attempts)
