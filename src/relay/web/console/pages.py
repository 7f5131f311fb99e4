"""The console's HTML: one layout, escaped values, and the headers every page carries."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Any

from starlette.responses import HTMLResponse, Response

from relay.clock import isoformat
from relay.web.console.session import Session
from relay.web.middleware import PAGE_HEADERS

# The edge middleware sends these on every console and docs answer; a route that
# names one of them (the stylesheet's Cache-Control) sends its own value instead.
HEADERS = PAGE_HEADERS
_NAV = (
    ("overview", "/console/overview", "Overview"),
    ("lookup", "/console/lookup", "Look-up"),
    ("lists", "/console/verifications", "Verifications"),
    ("events", "/console/events", "Events"),
    ("keys", "/console/keys", "Keys"),
    ("routes", "/console/routes", "Routes"),
    ("account", "/console/account", "Account"),
)

# Pages of the whole deployment: the nav shows them to admin sessions only.
_ADMIN_ONLY = frozenset({"routes"})


def e(value: Any) -> str:
    if isinstance(value, datetime):
        return escape(isoformat(value))
    return escape("" if value is None else str(value))


def page(
    title: str,
    body: str,
    *,
    session: Session | None = None,
    here: str = "",
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    nav = ""
    if session is not None:
        links = "".join(
            f'<a href="{href}"{" class=here" if key == here else ""}>{label}</a>'
            for key, href, label in _NAV
            if key not in _ADMIN_ONLY or session.is_admin
        )
        who = "admin: every account" if session.is_admin else _who(session)
        nav = (
            f"<header><strong>Relay console</strong>{links}"
            f'<span class="muted">{e(who)}</span>'
            f'<form method="post" action="/console/sign-out">{csrf_field(session)}'
            '<button type="submit" id="sign-out">Sign out</button></form></header>'
        )
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)} · Relay console</title>"
        '<link rel="stylesheet" href="/console/static/console.css"></head>'
        f"<body>{nav}<main><h1>{e(title)}</h1>{body}</main></body></html>"
    )
    return HTMLResponse(html, status_code=status, headers=headers)


def _who(session: Session) -> str:
    mode = "live" if session.livemode else "test"
    return f"{session.account_id} · {mode} mode"


def csrf_field(session: Session) -> str:
    return f'<input type="hidden" name="csrf" value="{e(session.csrf)}">'


def table(headings: Sequence[str], rows: Iterable[Sequence[Any]], *, raw: bool = False) -> str:
    """Cells are escaped unless `raw` (cells the caller built from escaped parts)."""
    head = "".join(f"<th>{e(h)}</th>" for h in headings)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell if raw else e(cell)}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def refusal(message: str) -> str:
    return f'<p class="refusal" role="alert">{e(message)}</p>'


def notice(message: str) -> str:
    return f'<p class="notice" role="status">{e(message)}</p>'


def button_form(action: str, session: Session, label: str, fields: dict[str, str]) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{e(name)}" value="{e(value)}">'
        for name, value in fields.items()
    )
    return (
        f'<form class="inline" method="post" action="{e(action)}">{csrf_field(session)}{hidden}'
        f'<button type="submit">{e(label)}</button></form>'
    )
