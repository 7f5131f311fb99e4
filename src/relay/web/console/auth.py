"""Signing in and out, and what every console request checks first.

A key session sees its own account in the key's mode; an admin session (the
`admin_token` setting) sees every account. Failed sign-ins are counted with the
API's own moving-window limiter, per client address (as `trusted_proxies`
resolve it), per key prefix across every address, and for the admin token
across every address; a sign-in that succeeds never counts. A right secret always
signs in, whatever the budgets say (decision 0041): once a budget a key would
spend is spent, a key this process does not know to be valid
(`accounts.known_keys`) is refused with 429 without a database read, and a known
one is authenticated as usual; once the admin budget is spent, every admin-token
attempt waits ADMIN_ATTEMPT_DELAY before it is compared, and a wrong one is
refused with 429. Every POST must come from this origin (Origin header) and,
once signed in, carry the session's CSRF token.
"""

from __future__ import annotations

import asyncio
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
# Seconds every admin-token attempt waits, the right one too, while the admin budget
# is spent: a guess holds a connection that long, and an early answer tells nothing.
ADMIN_ATTEMPT_DELAY = 1.0


@dataclass
class Console:
    services: Services
    sessions: Sessions
    # Failed sign-ins per client address, per key prefix from every address, and with
    # the admin token from every address.
    signins: RequestRateLimiter
    prefixes: RequestRateLimiter
    admin_failures: RequestRateLimiter

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
            RequestRateLimiter(
                rate=settings.console_admin_failure_rate,
                burst=settings.console_admin_failure_burst,
                storage_uri=settings.rate_limit_storage,
                namespace="relay-console-admin-failure",
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
    address = (console.signins, limit_key(_client(console, request)))
    prefix = next((p for p in _KEY_PREFIXES if secret.startswith(p)), None)
    budgets = [address]
    # What is not shaped like a key is an admin-token attempt (an admin token shaped like
    # a key still signs in, it is only never delayed).
    if secret and prefix is None and console.services.settings.admin_token:
        budgets.append((console.admin_failures, "admin"))
        if await console.admin_failures.wait("admin") is not None:
            await asyncio.sleep(ADMIN_ATTEMPT_DELAY)
    if _is_admin_token(console, secret):
        _, cookie = await console.sessions.issue(kind="admin", now=_now(console))
        return _signed_in(console, cookie)
    if prefix is not None:
        return await _key_sign_in(console, request, secret, [address, (console.prefixes, prefix)])
    return await _failed(budgets, await _waits(budgets))


Budgets = list[tuple[RequestRateLimiter, str]]


async def _key_sign_in(
    console: Console, request: Request, secret: str, budgets: Budgets
) -> Response:
    """A key signs in if it answers this client, whatever the budgets; once one it would
    spend is spent, only a key this process knows to be valid costs a database read."""
    waits = await _waits(budgets)
    if waits and not await console.services.accounts.is_known_key(secret):
        return _too_many(max(waits))
    try:
        caller = await console.services.accounts.authenticate(secret, _client(console, request))
    except AuthenticationFailed:
        return await _failed(budgets, [])
    _, cookie = await console.sessions.issue(
        kind="key",
        now=_now(console),
        account_id=caller.account_id,
        livemode=caller.livemode,
        key_id=caller.key_id,
    )
    return _signed_in(console, cookie)


def _is_admin_token(console: Console, secret: str) -> bool:
    admin = console.services.settings.admin_token
    return bool(admin) and hmac.compare_digest(secret.encode(), str(admin).encode())


async def _waits(budgets: Budgets) -> list[int]:
    return [wait for limiter, key in budgets if (wait := await limiter.wait(key)) is not None]


async def _failed(budgets: Budgets, waits: list[int]) -> Response:
    """A wrong secret: counted in each of its budgets; 429 if one was already spent."""
    for limiter, key in budgets:
        await limiter.acquire(key)
    if waits:
        return _too_many(max(waits))
    return _signin_page("That key or token was not accepted.", status=401)


def _too_many(wait: int) -> Response:
    return page(
        "Sign in",
        refusal(f"Too many failed sign-ins; try again in {wait} s."),
        status=429,
        headers={"Retry-After": str(wait)},
    )


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
