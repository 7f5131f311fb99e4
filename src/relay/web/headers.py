"""A request's headers by name, made once per request for every layer that reads them."""

from __future__ import annotations

from starlette.types import Scope

_SCOPE_KEY = "relay.headers"


def headers_of(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lower-case name; of a repeated one, the last (as
    `dict(scope["headers"])` gives them). Kept in the scope: the edge, the rate limit,
    the key and the idempotency layer each read some, and the list is walked once."""
    found: dict[bytes, bytes] | None = scope.get(_SCOPE_KEY)
    if found is None:
        found = scope[_SCOPE_KEY] = dict(scope["headers"])
    return found
