"""Look-up: a verification, a message or an event by id, or a destination's history
(a phone number, or an email address)."""

from __future__ import annotations

import re

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.console import timeline
from relay.email_address import parse_mailbox
from relay.errors import ParameterInvalid
from relay.ids import is_id
from relay.web.console.auth import Console, current, view_of
from relay.web.console.erasure import erase_form
from relay.web.console.pages import HEADERS, button_form, e, page, refusal, table
from relay.web.console.session import Session

# Stored numbers are E.164, email addresses kept by their mailbox: anything else cannot
# match one, and any spelling of an address finds its mailbox's verifications.
PHONE_SHAPE = re.compile(r"^\+[1-9]\d{6,14}$")


def _destination(q: str) -> str | None:
    if PHONE_SHAPE.match(q):
        return q
    if "@" not in q:
        return None
    try:
        return parse_mailbox(q)
    except ParameterInvalid:
        return None


_FORM = (
    '<form method="get" action="/console/lookup"><p>'
    '<input type="text" id="q" name="q" value="{q}"'
    ' placeholder="ver_…, msg_…, evt_…, +14155552671 or ada@example.com">'
    ' <button type="submit" id="find">Find</button></p></form>'
)


async def lookup_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    view = view_of(session, request)
    q = request.query_params.get("q", "").strip()
    body = _FORM.format(q=e(q))
    if not q:
        return page("Look-up", body, session=session, here="lookup")
    if is_id(q, "evt"):
        related = await console.services.db.read(lambda tx: timeline.related_of(tx, view, q))
        if related is not None:
            return RedirectResponse(f"/console/timeline/{related}", 303, headers=HEADERS)
    elif is_id(q, "ver") or is_id(q, "msg"):
        return RedirectResponse(f"/console/timeline/{q}", 303, headers=HEADERS)
    elif (destination := _destination(q)) is not None:
        found = await console.services.db.read(
            lambda tx: timeline.find_by_number(tx, view, destination)
        )
        if found:
            rows = [
                [
                    f'<a href="/console/timeline/{e(s.id)}">{e(s.id)}</a>',
                    e(s.number),
                    e(s.status),
                    e(s.created_at),
                ]
                for s in found
            ]
            listing = table(["Id", "Number", "Status", "Created"], rows, raw=True)
            listing += erase_form(session, view, destination)
            return page("Look-up", body + listing, session=session, here="lookup")
    else:
        body += refusal(
            "Give a verification, message or event id, a number in E.164 form or an email address."
        )
        return page("Look-up", body, session=session, here="lookup", status=400)
    body += refusal("Nothing matches that.")
    return page("Look-up", body, session=session, here="lookup", status=404)


async def timeline_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    view = view_of(session, request)
    subject_id = request.path_params["subject_id"]
    found = None
    if is_id(subject_id, "ver") or is_id(subject_id, "msg"):
        found = await console.services.db.read(lambda tx: timeline.timeline(tx, view, subject_id))
    if found is None:
        return page(
            "Not found",
            refusal(f"No such verification or message: {subject_id}"),
            session=session,
            status=404,
        )
    notice = request.query_params.get("done", "")
    return page(
        f"Timeline of {found.subject.id}",
        (f'<p class="notice" role="status">{e(notice)}</p>' if notice else "")
        + render(found, session),
        session=session,
        here="lookup",
    )


def render(found: timeline.Timeline, session: Session) -> str:
    s = found.subject
    summary = table(
        [
            "Number",
            "Country",
            "Mode",
            "Status",
            "Checks",
            "Sends",
            "Created",
            "Expires",
            "Approved",
            "Canceled",
        ],
        [
            [
                s.number,
                s.country,
                "live" if s.livemode else "test",
                s.status,
                s.checks,
                s.sends,
                s.created_at,
                s.expires_at,
                s.approved_at,
                s.canceled_at,
            ]
        ],
    )
    actions = ""
    if s.kind == "verification" and s.status == "pending":
        actions = button_form(
            "/console/actions/cancel", session, "Cancel this verification", {"id": s.id}
        )
    attempts = table(
        ["Attempt", "Carrier", "Carrier id", "Status", "Receipt / error", "Queued", "Updated"],
        [
            [
                a.id,
                a.carrier + (" (failover)" if a.position else ""),
                a.carrier_message_id,
                a.status,
                _error(a.error) or ("receipt" if a.status == "delivered" else ""),
                a.at,
                a.updated_at,
            ]
            for a in found.attempts
        ],
    )
    events = "".join(_event(event, session) for event in found.events)
    return (
        f"<p>Account {e(s.account_id)} · {e(s.kind)}</p>{summary}{actions}"
        f"<h2>SMS attempts</h2>{attempts}<h2>Events and webhook deliveries</h2>"
        f'<div id="events">{events or "<p>No events.</p>"}</div>'
    )


def _error(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("code") or error.get("message") or "")
    return "" if error is None else str(error)


def _event(event: timeline.Event, session: Session) -> str:
    deliveries = (
        table(
            ["#", "At", "Status code", "Error", "Latency ms", "Response"],
            [
                [d.number, d.at, d.status_code, d.error, d.duration_ms, d.response_excerpt]
                for d in event.deliveries
            ],
        )
        if event.deliveries
        else ""
    )
    replay = ""
    if event.webhook_url and event.delivery_status in ("delivered", "dropped"):
        replay = button_form(
            "/console/actions/replay", session, "Replay delivery", {"event_id": event.id}
        )
    return (
        f'<section class="event" data-event="{e(event.id)}"><h3>{e(event.type)}'
        f' <span class="muted">{e(event.id)} · {e(event.created_at)} · delivery'
        f' <span class="delivery-status">{e(event.delivery_status)}</span></span></h3>'
        f"{deliveries}{replay}</section>"
    )
