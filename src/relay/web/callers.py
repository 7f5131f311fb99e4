"""Who is calling, for middleware that runs before the routes: authenticated once per request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.types import Scope

from relay.accounts.access import PresentedKey
from relay.accounts.models import Caller
from relay.errors import AuthenticationFailed, RateLimited
from relay.log import bind
from relay.services import Services
from relay.web.peers import client_address

_SCOPE_KEY = "relay.caller"
_DEFERRED = "relay.deferred_key"
# Whole seconds until `key_id` may make a request, or None if it may now (the rate limit).
Limit = Callable[[str], Awaitable[int | None]]


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


class DeferredKey:
    """The key of a request whose route looks it up in its own first statement (an
    operation with `reads_key`): the rate limit middleware leaves the lookup, and the
    limit after it, to that route. The route hands `presented` and `admit` to its use
    case; if it refuses the request before the key was looked up, `as_any_other` does
    what the middleware does for any other route, and the route starts over, so that
    which error comes first is decided in one place (`relay.web.dispatch`)."""

    def __init__(self, scope: Scope, services: Services, limit: Limit) -> None:
        self._scope = scope
        self._services = services
        self._limit = limit
        # Whether the key was accepted: from then on the route's refusals stand.
        self.decided = False

    @property
    def presented(self) -> PresentedKey:
        client = client_address(self._scope, self._services.settings.trusted_proxies)
        return PresentedKey(bearer_token(self._scope), client)

    async def admit(self, caller: Caller) -> None:
        """The key was accepted: the request is the caller's, and counts against its limit."""
        self.decided = True
        self._scope[_SCOPE_KEY] = caller
        bind(account_id=caller.account_id, livemode=caller.livemode)
        wait = await self._limit(caller.key_id)
        if wait is not None:
            raise RateLimited(retry_after=wait)

    async def as_any_other(self) -> None:
        """The key looked up and the limit applied as before any other route."""
        caller = await scope_caller(self._scope, self._services)
        if caller is not None:
            await self.admit(caller)


def defer_key(scope: Scope, services: Services, limit: Limit) -> None:
    scope[_DEFERRED] = DeferredKey(scope, services, limit)


def deferred_key(scope: Scope) -> DeferredKey | None:
    found: DeferredKey | None = scope.get(_DEFERRED)
    return found


def base_url(scope: Scope) -> str:
    host = dict(scope["headers"]).get(b"host", b"localhost").decode("latin-1")
    return f"https://{host}"
