"""Signing in and out, and what every console request checks first.

A key session sees its own account in the key's mode; an admin session (the
`admin_token` setting) sees every account. Sign-ins are limited per client
address with the API's own moving-window limiter, so guessing keys here is no
faster than against the API. Every POST must come from this origin (Origin
header) and, once signed in, carry the session's CSRF token.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.accounts.access import IpAddress, admits
from relay.accounts.models import Caller
from relay.console.scope import View
from relay.errors import AuthenticationFailed, ResourceMissing
from relay.services import Services
from relay.web.callers import base_url
from relay.web.console.pages import HEADERS, e, page, refusal
from relay.web.console.session import COOKIE, Session, Sessions, csrf_matches
from relay.web.peers import client_address
from relay.web.ratelimit import RequestRateLimiter


@dataclass
class Console:
    services: Services
    sessions: Sessions
    signins: RequestRateLimiter

    @classmethod
    def of(cls, services: Services) -> Console:
        settings = services.settings
        return cls(
            services,
            Sessions(settings),
            RequestRateLimiter(
                rate=settings.console_signin_rate,
                burst=settings.console_signin_burst,
                storage_uri=settings.rate_limit_storage,
            ),
        )


class Refused(Exception):
    """A request the console answers with a page of its own (not signed in, forged...)."""

    def __init__(self, response: Response) -> None:
        self.response = response


async def form(request: Request) -> dict[str, str]:
    """An urlencoded form's fields, the first value of each."""
    fields = parse_qs((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def same_origin(request: Request) -> bool:
    """Whether a POST comes from one of this server's pages: its Origin is the address the
    browser asked for (the Host it sent) or Relay's base URL (`public_url` behind a proxy)."""
    origin = request.headers.get("origin")
    if origin is None:
        return False
    settings = request.app.state.services.settings
    asked = f"https://{request.headers.get('host', '')}"
    return origin in (asked, base_url(request.scope, settings))


def _session(console: Console, request: Request) -> Session | None:
    """The cookie's session, checked against the services' clock (tests move it)."""
    now = console.services.clock.now().timestamp()
    return console.sessions.read(request.cookies.get(COOKIE), now=now)


async def current(console: Console, request: Request) -> Session:
    """The request's live session, or Refused with the sign-in page."""
    session = _session(console, request)
    if (
        session is not None
        and not session.is_admin
        and not await _key_answers(console, session, request)
    ):
        session = None
    if session is None:
        expired = COOKIE in request.cookies
        raise Refused(_signin_page("Your session has ended; sign in again." if expired else None))
    return session


async def acting(console: Console, request: Request) -> tuple[Session, dict[str, str]]:
    """A signed-in POST from this origin with the session's CSRF token, and its form."""
    session = await current(console, request)
    fields = await form(request)
    if not same_origin(request) or not csrf_matches(session, fields.get("csrf")):
        raise Refused(
            page("Refused", refusal("This form is stale or forged; reload the page."), status=403)
        )
    return session, fields


async def _key_answers(console: Console, session: Session, request: Request) -> bool:
    """Whether the session's key would still answer this client: not revoked, not past
    its roll, and this address inside its ranges, as for an API request."""
    assert session.key_id is not None
    try:
        key = await console.services.accounts.key(session.key_id)
    except ResourceMissing:
        return False
    if key.state not in ("active", "rolling"):
        return False
    if key.networks is None:
        return True
    client = _client(console, request)
    return client is not None and admits(key.networks, client)


def _client(console: Console, request: Request) -> IpAddress | None:
    return client_address(request.scope, console.services.settings.trusted_proxies)


def view_of(session: Session, request: Request) -> View:
    """A key session's own account and mode; an admin's optional ?account= and ?mode=."""
    if not session.is_admin:
        return View(session.account_id, session.livemode)
    account = request.query_params.get("account") or None
    mode = request.query_params.get("mode")
    return View(account, None if mode not in ("test", "live") else mode == "live")


def caller_for(session: Session, account_id: str, livemode: bool) -> Caller:
    """The caller the services see for a console action on `account_id`'s data."""
    return Caller(
        account_id=account_id,
        brand="",
        webotp_domain=None,
        livemode=livemode,
        key_id=session.key_id or "console-admin",
    )


def _signin_page(problem: str | None = None, *, status: int = 200) -> Response:
    body = (refusal(problem) if problem else "") + (
        '<form method="post" action="/console/sign-in">'
        '<p><label for="secret">Secret API key (sk_test_… or sk_live_…) or admin token</label></p>'
        '<p><input type="password" id="secret" name="secret" autocomplete="off" autofocus>'
        ' <button type="submit" id="sign-in">Sign in</button></p></form>'
        '<p class="muted">A test key shows test data only; a live key, live data only.</p>'
    )
    return page("Sign in", body, status=status)


async def signin_page(console: Console, request: Request) -> Response:
    session = _session(console, request)
    if session is not None:
        return RedirectResponse("/console/overview", status_code=303, headers=HEADERS)
    return _signin_page()


async def sign_in(console: Console, request: Request) -> Response:
    if not same_origin(request):
        return _signin_page("Sign in from this server's own page.", status=403)
    client = request.client.host if request.client else "unknown"
    wait = await console.signins.acquire(f"console-signin:{client}")
    if wait is not None:
        return page(
            "Sign in",
            refusal(f"Too many sign-in attempts; try again in {wait} s."),
            status=429,
            headers={"Retry-After": str(wait)},
        )
    secret = (await form(request)).get("secret", "").strip()
    now = console.services.clock.now().timestamp()
    admin = console.services.settings.admin_token
    if admin and hmac.compare_digest(secret.encode(), admin.encode()):
        _, cookie = console.sessions.issue(kind="admin", now=now)
        return _signed_in(console, cookie)
    try:
        caller = await console.services.accounts.authenticate(
            secret or None, _client(console, request)
        )
    except AuthenticationFailed:
        return _signin_page("That key or token was not accepted.", status=401)
    _, cookie = console.sessions.issue(
        kind="key",
        now=now,
        account_id=caller.account_id,
        livemode=caller.livemode,
        key_id=caller.key_id,
    )
    return _signed_in(console, cookie)


def _signed_in(console: Console, cookie: str) -> Response:
    response = RedirectResponse("/console/overview", status_code=303, headers=HEADERS)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=console.sessions.lifetime,
        path="/console",
        secure=True,
        httponly=True,
        samesite="strict",
    )
    return response


async def sign_out(console: Console, request: Request) -> Response:
    await acting(console, request)
    response = page(
        "Signed out", f'<p>{e("You are signed out.")} <a href="/console">Sign in</a></p>'
    )
    response.delete_cookie(COOKIE, path="/console", secure=True, httponly=True, samesite="strict")
    return response
