"""Who is calling, for middleware that runs before the routes: authenticated once per request."""

from __future__ import annotations

from starlette.types import Scope

from relay.accounts.models import Caller
from relay.accounts.service import AccountService
from relay.errors import AuthenticationFailed
from relay.log import bind

_SCOPE_KEY = "relay.caller"


def bearer_token(scope: Scope) -> str | None:
    header = dict(scope["headers"]).get(b"authorization")
    if header is None:
        return None
    scheme, _, token = header.decode("latin-1").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def scope_caller(scope: Scope, accounts: AccountService) -> Caller | None:
    """The caller, or None when the key is missing or wrong: the route then answers 401
    itself, so middleware never shapes authentication errors."""
    if _SCOPE_KEY not in scope:
        try:
            scope[_SCOPE_KEY] = await accounts.authenticate(bearer_token(scope))
        except AuthenticationFailed:
            scope[_SCOPE_KEY] = None
    found: Caller | None = scope[_SCOPE_KEY]
    if found is not None:
        bind(account_id=found.account_id, livemode=found.livemode)
    return found


def base_url(scope: Scope) -> str:
    host = dict(scope["headers"]).get(b"host", b"localhost").decode("latin-1")
    return f"https://{host}"
