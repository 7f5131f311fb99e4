"""The console's actions, each through the same service the API or the CLI uses."""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.accounts.models import MODES, Mode
from relay.console import timeline
from relay.console.scope import View
from relay.errors import RelayError
from relay.events.replay import replay
from relay.ids import is_id
from relay.web.console import texts
from relay.web.console.auth import Console, acting, caller_for, current
from relay.web.console.pages import (
    HEADERS,
    button_form,
    csrf_field,
    e,
    notice,
    page,
    refusal,
)
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
    done = request.query_params.get("done", "")
    shown = notice(done) if done else ""
    if session.is_admin:
        looking_at = request.query_params.get("account") or ""
        body = (
            "<p>Test events and live events are signed with secrets of their own mode."
            " Roll an account's test-mode or live-mode webhook signing secret:</p>"
            + _admin_roll_form(session, looking_at)
        )
        if is_id(looking_at, "acct"):
            body += await texts.section(console, session, looking_at)
    else:
        mode = _mode(bool(session.livemode))
        other = _mode(not session.livemode)
        body = (
            f"<p>Account <code>{e(session.account_id)}</code>. API keys are on the"
            ' <a href="/console/keys">Keys</a> page.</p>'
            f'<h2 id="secret-mode">Webhook signing secret: {mode} mode</h2>'
            f"<p>It signs this account's {mode} events. {other.capitalize()} events are"
            f" signed with a {other}-mode secret of their own, which only a {other}-key"
            " session, an admin or the CLI can roll.</p>"
            "<p>A new secret is shown once; the previous one keeps signing for 24 hours,"
            " so receivers can switch without losing a delivery.</p>"
            + button_form(
                "/console/actions/roll-secret",
                session,
                f"Roll {mode} webhook secret",
                {"account_id": session.account_id or "", "mode": mode},
            )
        ) + await texts.section(console, session, session.account_id or "")
    return page("Account", shown + body, session=session, here="account")


def _admin_roll_form(session: Session, account_id: str) -> str:
    buttons = "".join(
        f' <button type="submit" name="mode" value="{mode}" id="roll-{mode}">'
        f"Roll {mode} webhook secret</button>"
        for mode in MODES
    )
    return (
        '<form method="post" action="/console/actions/roll-secret">'
        f"{csrf_field(session)}"
        f'<input type="text" name="account_id" placeholder="acct_…" value="{e(account_id)}">'
        f"{buttons}</form>"
    )


def _mode(livemode: bool) -> Mode:
    return "live" if livemode else "test"


async def roll_secret(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    asked = fields.get("mode")
    if session.is_admin:
        account_id = fields.get("account_id", "")
        if asked not in MODES:
            return _refused(session, "Choose whose secret to roll: test or live.", 400)
        mode: Mode = "live" if asked == "live" else "test"
    else:
        # A key session rolls its own mode's secret only: a test key must never
        # reach what signs live events, whatever the form says.
        account_id = session.account_id or ""
        mode = _mode(bool(session.livemode))
        if asked is not None and asked != mode:
            return _refused(
                session, f"A {mode}-key session sees and rolls only the {mode}-mode secret.", 403
            )
    if not is_id(account_id, "acct"):
        return _refused(session, "Name an account id (acct_…).", 400)
    try:
        secret, ends = await console.services.accounts.roll_webhook_secret(
            account_id, mode, overlap=SECRET_OVERLAP
        )
    except RelayError as refused:
        return _refused(session, refused.message, 404)
    body = notice(f"New {mode}-mode webhook signing secret of {account_id}, shown this once:") + (
        f'<p><code class="secret" id="new-secret" data-mode="{mode}">{e(secret)}</code></p>'
        f"<p>It signs {mode} events only. The previous {mode}-mode secret keeps signing"
        f" them until {e(ends)}.</p>"
    )
    return page(f"Webhook secret rolled ({mode})", body, session=session, here="account")


def _refused(session: Session, message: str, status: int) -> Response:
    return page("Refused", refusal(message), session=session, status=status)


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
