"""The API's operations in one pass: the route found by a look-up, then the edge, the
rate limit, the Idempotency-Key and the operation called in turn, and the answer's
headers put together once (decision 0050).

Each step is the one the ASGI layers run for every other request (`Edge`,
`RateLimits`, `Keys`, `PathEndpoint`), in the same order and with the same
answers; what is left out is only their passing of the request and the answer from
layer to layer. A request this does not take (no route of the API, another
method, HEAD, a page, the console, a non-HTTP scope) goes through Starlette as
before.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from relay import errors as e
from relay.ids import new_id
from relay.log import begin_request, end_request
from relay.web.dispatch import PathEndpoint
from relay.web.idempotency import Keys
from relay.web.middleware import Edge, edge_headers
from relay.web.path_table import PathTable
from relay.web.ratelimit import RateLimits


class ApiFront:
    def __init__(
        self, routes: Sequence[BaseRoute], *, edge: Edge, limits: RateLimits, keys: Keys
    ) -> None:
        self.table = PathTable(routes)
        self.edge = edge
        self.limits = limits
        self.keys = keys

    def find(self, scope: Scope) -> tuple[PathEndpoint, dict[str, str]] | None:
        """The API route of an HTTP request, or None: the request is not for this pass."""
        if scope["type"] != "http" or scope.get("root_path"):
            return None
        return self.table.find(scope["method"], scope["path"])

    async def __call__(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        found: tuple[PathEndpoint, dict[str, str]],
    ) -> None:
        request_id = new_id("req")
        context = begin_request(request_id)
        try:
            await self._answer(scope, receive, send, request_id, found)
        finally:
            end_request(context)

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        found: tuple[PathEndpoint, dict[str, str]],
    ) -> None:
        edge = self.edge
        started = time.perf_counter()
        status = 0
        added = edge.security_headers(scope)
        body, refusal = await edge.admit(scope, receive)
        if refusal is not None:
            status = await _send(send, edge.refused(scope, refusal), added, request_id)
        else:
            try:
                response = await self._limited(scope, body, found)
                # Set before the answer goes: a failure while sending is one after it started.
                status = response.status_code
                await _send(send, response, added, request_id)
            except Exception as fault:
                answer = edge.failed(scope, fault, request_id)
                if status:
                    raise
                status = await _send(send, answer, added, request_id)
        edge.finish(scope, request_id, status, started)

    async def _limited(
        self, scope: Scope, body: bytes, found: tuple[PathEndpoint, dict[str, str]]
    ) -> Response:
        client = self.limits.client_of(scope)
        if client is None:
            return await self._keyed(scope, body, found)
        refusal = await self.limits.refusal(scope, client)
        if refusal is not None:
            return self.edge.refused(scope, refusal)
        response = await self._keyed(scope, body, found)
        await self.limits.count(client, response.status_code)
        return response

    async def _keyed(
        self, scope: Scope, body: bytes, found: tuple[PathEndpoint, dict[str, str]]
    ) -> Response:
        raw_key = self.keys.key_of(scope)
        if raw_key is None:
            return await _call(scope, body, found)

        async def run(asked: Scope, with_body: bytes) -> Response:
            if asked is scope:
                return await _call(scope, with_body, found)
            # The resource a replay recovers (an idempotent GET of the API).
            route = self.table.find(asked["method"], asked["path"])
            if route is None:
                no_route = e.RouteNotFound(f"No route {asked['method']} {asked['path']}.")
                return self.edge.refused(asked, no_route)
            return await _call(asked, with_body, route)

        return await self.keys.answer(scope, body, raw_key, run)


async def _call(scope: Scope, body: bytes, found: tuple[PathEndpoint, dict[str, str]]) -> Response:
    endpoint, params = found
    # What the router leaves in the scope: the route's template (for metric labels) and
    # the path's parameters.
    scope["endpoint"] = endpoint
    scope["path_params"] = params
    return await endpoint.answer(scope, body)


async def _send(
    send: Send, response: Response, added: tuple[tuple[bytes, bytes], ...], request_id: str
) -> int:
    headers = edge_headers(response.raw_headers, added, request_id)
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})
    return response.status_code
