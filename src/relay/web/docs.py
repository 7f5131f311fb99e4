"""Human-readable pages the service serves itself: the API reference and error codes."""

from __future__ import annotations

import html
from typing import Any

from relay import errors as e
from relay.carriers.routing import ERROR_MESSAGES
from relay.web.errors import status_and_type

_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "code{background:#f3f3f3;padding:0 .2rem}table{border-collapse:collapse;width:100%}"
    "td,th{border-bottom:1px solid #ddd;padding:.3rem;text-align:left;vertical-align:top}"
    "h3{margin-top:2rem}"
)


def _subclasses(cls: type[e.RelayError]) -> list[type[e.RelayError]]:
    found: list[type[e.RelayError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def catalogue() -> list[tuple[int, str, str, str]]:
    """Every error code Relay can answer with: (HTTP status, type, code, meaning)."""
    rows: dict[str, tuple[int, str, str, str]] = {}
    for cls in _subclasses(e.RelayError):
        sample = cls.__new__(cls)
        status, kind = status_and_type(sample)
        rows.setdefault(cls.code, (status, kind, cls.code, cls.default_message))
    return sorted(rows.values())


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def errors_page() -> str:
    rows = "".join(
        f"<tr id='{code}'><td><code>{code}</code></td><td>{status}</td>"
        f"<td><code>{kind}</code></td><td>{html.escape(text)}</td></tr>"
        for status, kind, code, text in catalogue()
    )
    intro = (
        '<p>Every failure answers with <code>{"error": {"type", "code", "message", '
        '"param", "doc_url"}}</code>. <code>param</code> names the field at fault, when one '
        "is. 429 answers carry <code>Retry-After</code>.</p>"
    )
    table = f"<table><tr><th>code</th><th>HTTP</th><th>type</th><th>meaning</th></tr>{rows}</table>"
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
    return _page("Relay error codes", intro + table + attempts)


def api_page(openapi: dict[str, Any]) -> str:
    sections = [
        "<p>Machine-readable: <a href='/v1/openapi.json'>/v1/openapi.json</a>. "
        "Authenticate with <code>Authorization: Bearer sk_test_…</code>. "
        "Errors: <a href='/docs/errors'>/docs/errors</a>.</p>"
    ]
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            sections.append(_operation(method.upper(), path, operation))
    return _page("Relay API reference", "".join(sections))


def _operation(method: str, path: str, operation: dict[str, Any]) -> str:
    summary = html.escape(operation.get("summary", ""))
    description = html.escape(operation.get("description", ""))
    params = "".join(
        f"<li><code>{html.escape(p['name'])}</code> ({p['in']}): "
        f"{html.escape(p.get('description', ''))}</li>"
        for p in operation.get("parameters", [])
    )
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = body.get("schema", {}).get("$ref", "")
    body_line = f"<p>Body: <code>{html.escape(ref.rsplit('/', 1)[-1])}</code></p>" if ref else ""
    return (
        f"<h3><code>{method} {html.escape(path)}</code> {summary}</h3><p>{description}</p>"
        f"{'<ul>' + params + '</ul>' if params else ''}{body_line}"
    )
