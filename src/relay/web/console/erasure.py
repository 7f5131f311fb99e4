"""Erasing a destination from the look-up page: an admin session only, through the same
service as `relay erase` and `POST /v1/erasures` (docs/privacy.md)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from relay.console.scope import View
from relay.erasure.models import KINDS
from relay.errors import RelayError
from relay.web.console.auth import Console, acting
from relay.web.console.pages import button_form, e, page, refusal, table
from relay.web.console.session import Session

ACTION = "/console/actions/erase"


def erase_form(session: Session, view: View, destination: str) -> str:
    """The button under a destination's look-up: what the view shows is what it erases."""
    if not session.is_admin:
        return ""
    mode = "" if view.livemode is None else ("live" if view.livemode else "test")
    scope = "every account" if view.account_id is None else view.account_id
    scope += ", both modes" if view.livemode is None else f", {mode} mode"
    fields = {"to": destination, "account": view.account_id or "", "mode": mode}
    return (
        f"<p>Erase deletes every row of {e(scope)} that names this destination, with its"
        " events and webhook deliveries; the figures keep their counts.</p>"
        + button_form(ACTION, session, "Erase everything naming this destination", fields)
    )


async def erase(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    if not session.is_admin:
        return page("Refused", refusal("Only an admin session erases."), status=403)
    mode = fields.get("mode", "")
    livemode = None if mode not in ("test", "live") else mode == "live"
    try:
        erasure = await console.services.erasures.erase(
            fields.get("to", ""), account_id=fields.get("account") or None, livemode=livemode
        )
    except RelayError as refused:
        return page("Not erased", refusal(refused.message), session=session, status=400)
    counts = table(["Kind", "Deleted"], [[kind, erasure.deleted[kind]] for kind in KINDS])
    body = f'<p class="notice" role="status">Erased {e(erasure.to)}.</p>{counts}'
    return page("Erased", body, session=session, here="lookup")
