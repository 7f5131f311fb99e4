"""Signing in and out, and what every console request checks first.

A key session sees its own account in the key's mode; an admin session (the
`admin_token` setting) sees every account. Failed sign-ins are limited with the
API's own moving-window limiter, per client address (as `trusted_proxies`
resolve it) and per key prefix across every address, so guessing keys here is
no faster than against the API; a sign-in that succeeds never counts, so an
office behind one address signs in as often as it likes. Every POST must come
from this origin (Origin header) and, once signed in, carry the session's CSRF
token.
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
from relay.web.console.pages import e, page, refusal
from relay.web.console.session import COOKIE, Session, Sessions, csrf_matches
from relay.web.peers import client_address, limit_key
from relay.web.ratelimit import RequestRateLimiter

_KEY_PREFIXES = ("sk_test_", "sk_live_")


@dataclass
class Console:
    services: Services
    sessions: Sessions
    # Failed sign-ins per client address, and per key prefix from every address.
    signins: RequestRateLimiter
    prefixes: RequestRateLimiter

    @classmethod
    def of(cls, services: Services) -> Console:
        settings = services.settings
        return cls(
            services,
            Sessions(settings, services.db),
            RequestRateLimiter(
                rate=settings.console_signin_rate,
                burst=settings.console_signin_burst,
                storage_uri=settings.rate_limit_storage,
                namespace="relay-console-signin",
            ),
            RequestRateLimiter(
                rate=settings.console_signin_prefix_rate,
                burst=settings.console_signin_prefix_burst,
                storage_uri=settings.rate_limit_storage,
                namespace="relay-console-signin-prefix",
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


def _now(console: Console) -> float:
    """The services' clock, in seconds (tests move it)."""
    return console.services.clock.now().timestamp()


async def _session(console: Console, request: Request) -> Session | None:
    return await console.sessions.read(request.cookies.get(COOKIE), now=_now(console))


async def current(console: Console, request: Request) -> Session:
    """The request's live session, or Refused with the sign-in page."""
    session = await _session(console, request)
    if (
        session is not None
        and not session.is_admin
        and not await _key_answers(console, session, request)
    ):
        # Ended for good: the key answering again (a range widened) does not reopen it.
        await console.sessions.end(session, now=_now(console))
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
    session = await _session(console, request)
    if session is not None:
        return RedirectResponse("/console/overview", status_code=303)
    return _signin_page()


async def sign_in(console: Console, request: Request) -> Response:
    if not same_origin(request):
        return _signin_page("Sign in from this server's own page.", status=403)
    secret = (await form(request)).get("secret", "").strip()
    budgets = _budgets(console, request, secret)
    waits = [wait for limiter, key in budgets if (wait := await limiter.wait(key)) is not None]
    if waits:
        wait = max(waits)
        return page(
            "Sign in",
            refusal(f"Too many failed sign-ins; try again in {wait} s."),
            status=429,
            headers={"Retry-After": str(wait)},
        )
    now = _now(console)
    admin = console.services.settings.admin_token
    if admin and hmac.compare_digest(secret.encode(), admin.encode()):
        _, cookie = await console.sessions.issue(kind="admin", now=now)
        return _signed_in(console, cookie)
    try:
        caller = await console.services.accounts.authenticate(
            secret or None, _client(console, request)
        )
    except AuthenticationFailed:
        for limiter, key in budgets:
            await limiter.acquire(key)
        return _signin_page("That key or token was not accepted.", status=401)
    _, cookie = await console.sessions.issue(
        kind="key",
        now=now,
        account_id=caller.account_id,
        livemode=caller.livemode,
        key_id=caller.key_id,
    )
    return _signed_in(console, cookie)


def _budgets(
    console: Console, request: Request, secret: str
) -> list[tuple[RequestRateLimiter, str]]:
    """The budgets a failed sign-in with `secret` spends: its client's, and for what
    looks like a key, its prefix's (the part of a key that is not secret)."""
    budgets = [(console.signins, limit_key(_client(console, request)))]
    prefix = next((p for p in _KEY_PREFIXES if secret.startswith(p)), None)
    if prefix is not None:
        budgets.append((console.prefixes, prefix))
    return budgets


def _signed_in(console: Console, cookie: str) -> Response:
    response = RedirectResponse("/console/overview", status_code=303)
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
    session, _ = await acting(console, request)
    await console.sessions.end(session, now=_now(console))
    response = page(
        "Signed out", f'<p>{e("You are signed out.")} <a href="/console">Sign in</a></p>'
    )
    response.delete_cookie(COOKIE, path="/console", secure=True, httponly=True, samesite="strict")
    return response
