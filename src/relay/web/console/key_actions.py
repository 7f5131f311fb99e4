"""The Keys page's actions: create, roll, restrict, revoke, each through `AccountService`
as `relay keys` does, each allowed or refused by `relay.accounts.authority` first.

A key session may revoke its own key or narrow its ranges, nothing else: it creates
no key, rolls none (not even its own: the successor's secret would go to whoever
holds the session) and widens no range. An admin session acts on any key. A refused
action changes nothing and answers the console's refusal page (403), whether or not
the key it names exists.

Revoking the key a session signed in with is allowed: it is the operator's key
to revoke. The answer says so and ends the session (the cookie is cleared, and
every other session of that key ends at its next page, which looks the key up).
"""

from __future__ import annotations

import math
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.accounts.access import parse_networks
from relay.accounts.authority import KeyAction, may_manage, restriction
from relay.accounts.models import ApiKey, Mode
from relay.errors import InvalidRequest, RelayError, ResourceMissing
from relay.ids import is_id
from relay.web.console.auth import Console, Refused, acting
from relay.web.console.keys import keys_url, networks_text, state_text
from relay.web.console.pages import HEADERS, e, notice, page, refusal
from relay.web.console.session import COOKIE, Session
from relay.web.errors import status_and_type

_UNITS = {"hours": 3600.0, "seconds": 1.0}
_MODES: dict[str, Mode] = {"test": "test", "live": "live"}


async def create(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    _authorize(session, "create", None)
    account_id = fields.get("account_id", "")
    mode = fields.get("mode", "")
    try:
        if not is_id(account_id, "acct"):
            raise ResourceMissing("Name an account id (acct_…).")
        chosen = _MODES.get(mode)
        if chosen is None:
            raise InvalidRequest("The mode is test or live.", param="mode")
        text = fields.get("networks", "").strip()
        networks = parse_networks(text) if text else None
        made = await console.services.accounts.create_key(account_id, chosen, networks=networks)
    except RelayError as problem:
        return _refused(session, problem, account_id)
    body = _secret("New key, shown this once:", made.secret) + _line(made.key)
    return _shown("Key created", session, made.key.account_id, body)


async def roll(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    try:
        key = await _key(console, session, "roll", fields.get("key_id", ""))
        overlap = _overlap(fields.get("overlap", ""), fields.get("unit", "hours"))
        rolled = await console.services.accounts.roll_key(key.id, overlap)
    except RelayError as problem:
        return _refused(session, problem, None)
    body = (
        _secret("The new key, shown this once:", rolled.secret)
        + _line(rolled.key)
        + f"<p>The previous key keeps working until {e(rolled.previous.expires_at)}:</p>"
        + _line(rolled.previous)
    )
    return _shown("Key rolled", session, rolled.key.account_id, body)


async def restrict(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    try:
        key = await _key(console, session, "restrict", fields.get("key_id", ""))
        networks = parse_networks(fields.get("networks", ""))
        # Decided on the key as read: a key session may only narrow what it answers.
        _authorize(session, restriction(key.networks, networks), key.id)
        done = await console.services.accounts.restrict_key(key.id, networks)
    except RelayError as problem:
        return _refused(session, problem, None)
    what = (
        "answers from anywhere"
        if done.networks is None
        else f"answers only from {networks_text(done)}"
    )
    return _back(session, done.account_id, f"{done.redacted} {what}.")


async def revoke(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    try:
        key = await _key(console, session, "revoke", fields.get("key_id", ""))
        done = await console.services.accounts.revoke_key(key.id)
    except RelayError as problem:
        return _refused(session, problem, None)
    if done.id != session.key_id:
        return _back(session, done.account_id, f"{done.redacted} is revoked.")
    response = page(
        "Key revoked",
        notice(f"{done.redacted} is revoked: that was this session's key, so the session ends.")
        + '<p><a href="/console">Sign in</a> with another key.</p>',
    )
    response.delete_cookie(COOKIE, path="/console", secure=True, httponly=True, samesite="strict")
    return response


async def _key(console: Console, session: Session, action: KeyAction, key_id: str) -> ApiKey:
    """The key `action` names, once the session may act on it."""
    _authorize(session, action, key_id)
    if not is_id(key_id, "key"):
        raise ResourceMissing(f"No key {key_id}.")
    return await console.services.accounts.key(key_id)


def _authorize(session: Session, action: KeyAction, key_id: str | None) -> None:
    # Decided before the key is looked up: the answer is the same whether it exists.
    if may_manage(session.kind, session.key_id, action, key_id):
        return
    if action == "create":
        why = "Creating a key needs an admin session or `relay keys create`."
    elif action == "roll":
        why = (
            "A key session rolls no key, not even its own: the new secret would be shown"
            " to whoever holds this session. Roll it from an admin session or with"
            " `relay keys roll`; revoke it here if it leaked."
        )
    elif action == "widen" and key_id == session.key_id:
        why = (
            "A key session may only narrow its key's ranges; widening them or lifting the"
            " restriction needs an admin session or `relay keys restrict`."
        )
    else:
        why = (
            f"This session may {action} only the key it signed in with;"
            " any other key needs an admin session or `relay keys`."
        )
    back = f'<p><a href="{e(keys_url(None, session))}">Back to the keys</a></p>'
    raise Refused(page("Refused", refusal(why) + back, session=session, status=403))


def _overlap(amount: str, unit: str) -> float:
    try:
        value = float(amount)
    except ValueError:
        value = math.nan
    if unit not in _UNITS or not math.isfinite(value):
        raise InvalidRequest("Give the overlap as a number of hours or seconds.", param="overlap")
    # roll_key checks the range (0 to 24 h) and words the refusal as the CLI does.
    return value * _UNITS[unit]


def _secret(title: str, secret: str) -> str:
    return notice(title) + f'<p><code class="secret" id="new-secret">{e(secret)}</code></p>'


def _line(key: ApiKey) -> str:
    parts = [key.redacted, key.id, key.mode, state_text(key), f"networks: {networks_text(key)}"]
    return f'<p class="key-line">{" · ".join(e(p) for p in parts)}</p>'


def _shown(title: str, session: Session, account_id: str, body: str) -> Response:
    back = f'<p><a href="{e(keys_url(account_id, session))}">Back to the keys</a></p>'
    return page(title, body + back, session=session, here="keys")


def _back(session: Session, account_id: str, message: str) -> Response:
    url = keys_url(account_id, session)
    joiner = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{joiner}done={quote(message)}", 303, headers=HEADERS)


def _refused(session: Session, problem: RelayError, account_id: str | None) -> Response:
    status = status_and_type(problem)[0]
    back = f'<p><a href="{e(keys_url(account_id, session))}">Back to the keys</a></p>'
    return page("Refused", refusal(problem.message) + back, session=session, status=status)
