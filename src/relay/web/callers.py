"""Who is calling, for middleware that runs before the routes: authenticated once per request."""

from __future__ import annotations

from starlette.types import Scope

from relay.accounts.models import Caller
from relay.errors import AuthenticationFailed
from relay.log import bind
from relay.services import Services
from relay.web.peers import client_address

_SCOPE_KEY = "relay.caller"


def bearer_token(scope: Scope) -> str | None:
    header = dict(scope["headers"]).get(b"authorization")
    if header is None:
        return None
    scheme, _, token = header.decode("latin-1").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


async def scope_caller(scope: Scope, services: Services) -> Caller | None:
    """The caller, or None when the key is missing, wrong, or refused from this address:
    the route then answers 401 itself, so middleware never shapes authentication errors.
    Kept for this request only: a revoked key is refused from the next one on."""
    if _SCOPE_KEY not in scope:
        client = client_address(scope, services.settings.trusted_proxies)
        try:
            scope[_SCOPE_KEY] = await services.accounts.authenticate(bearer_token(scope), client)
        except AuthenticationFailed:
            scope[_SCOPE_KEY] = None
    found: Caller | None = scope[_SCOPE_KEY]
    if found is not None:
        bind(account_id=found.account_id, livemode=found.livemode)
    return found


def base_url(scope: Scope) -> str:
    host = dict(scope["headers"]).get(b"host", b"localhost").decode("latin-1")
    return f"https://{host}"
