"""The console's actions, each through the same service the API or the CLI uses."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.console import timeline
from relay.console.scope import View
from relay.errors import RelayError
from relay.events.replay import replay
from relay.ids import is_id
from relay.web.console.auth import Console, acting, caller_for, current
from relay.web.console.pages import HEADERS, button_form, e, notice, page, refusal
from relay.web.console.session import Session

# The overlap the CLI's roll-webhook-secret gives by default.
SECRET_OVERLAP = 86400.0


async def cancel(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    verification_id = fields.get("id", "")
    found = await _subject(console, session, verification_id, "ver")
    if found is None:
        return _missing(session, verification_id)
    caller = caller_for(session, found.account_id, found.livemode)
    try:
        await console.services.verifications.cancel(caller, verification_id)
    except RelayError as refused:
        return _back(verification_id, f"Not canceled: {refused.message}")
    return _back(verification_id, "Canceled.")


async def replay_delivery(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    event_id = fields.get("event_id", "")
    view = View(session.account_id, session.livemode)
    related = None
    if is_id(event_id, "evt"):
        related = await console.services.db.read(lambda tx: timeline.related_of(tx, view, event_id))
    found = None if related is None else await _subject(console, session, related, related[:3])
    if found is None or related is None:
        return _missing(session, event_id)
    caller = caller_for(session, found.account_id, found.livemode)
    try:
        record = await replay(console.services.events, caller.scope, event_id)
    except RelayError as refused:
        return _back(related, f"Not replayed: {refused.message}")
    outcome = f"HTTP {record.status_code}" if record.status_code else record.error
    return _back(related, f"Replayed {event_id}: {outcome}, {record.duration_ms} ms.")


async def account_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    if session.is_admin:
        body = "<p>Roll an account's webhook signing secret:</p>" + _roll_form(session, None)
    else:
        body = (
            f"<p>Account <code>{e(session.account_id)}</code>. API keys are on the"
            ' <a href="/console/keys">Keys</a> page.</p><h2>Webhook signing secret</h2>'
            "<p>A new secret is shown once; the previous one keeps signing for 24 hours,"
            " so receivers can switch without losing a delivery.</p>"
            + _roll_form(session, session.account_id)
        )
    return page("Account", body, session=session, here="account")


def _roll_form(session: Session, account_id: str | None) -> str:
    if account_id is not None:
        return button_form(
            "/console/actions/roll-secret",
            session,
            "Roll webhook secret",
            {"account_id": account_id},
        )
    return (
        '<form method="post" action="/console/actions/roll-secret">'
        f'<input type="hidden" name="csrf" value="{e(session.csrf)}">'
        '<input type="text" name="account_id" placeholder="acct_…">'
        ' <button type="submit">Roll webhook secret</button></form>'
    )


async def roll_secret(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    account_id = session.account_id if not session.is_admin else fields.get("account_id", "")
    if account_id is None or not is_id(account_id, "acct"):
        return page("Refused", refusal("Name an account id (acct_…)."), session=session, status=400)
    try:
        secret, ends = await console.services.accounts.roll_webhook_secret(
            account_id, overlap=SECRET_OVERLAP
        )
    except RelayError as refused:
        return page("Refused", refusal(refused.message), session=session, status=404)
    body = notice("New webhook signing secret, shown this once:") + (
        f'<p><code class="secret" id="new-secret">{e(secret)}</code></p>'
        f"<p>The previous secret keeps signing until {e(ends)}.</p>"
    )
    return page("Webhook secret rolled", body, session=session, here="account")


async def _subject(
    console: Console, session: Session, subject_id: str, prefix: str
) -> timeline.Subject | None:
    if prefix not in ("ver", "msg") or not is_id(subject_id, prefix):
        return None
    view = View(None, None) if session.is_admin else View(session.account_id, session.livemode)
    found = await console.services.db.read(lambda tx: timeline.timeline(tx, view, subject_id))
    return None if found is None else found.subject


def _back(subject_id: str, message: str) -> Response:
    return RedirectResponse(
        f"/console/timeline/{subject_id}?done={quote(message)}", 303, headers=HEADERS
    )


def _missing(session: Session, what: str) -> Response:
    return page("Not found", refusal(f"Nothing to act on: {what}"), session=session, status=404)
