"""The ASGI application: one Starlette router over the route table, the API's
operations in one pass (`relay.web.front`), everything else behind `Services`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.types import Receive, Scope, Send

from relay import errors as e
from relay.services import Services
from relay.web import (
    carrier_routes,
    console,
    erasure_routes,
    event_routes,
    message_routes,
    metrics_route,
    routes,
)
from relay.web.api_reference import api_page
from relay.web.callback_budget import CallbackFailures
from relay.web.callers import base_url
from relay.web.dispatch import routes as router_routes
from relay.web.docs import errors_page
from relay.web.errors import error_response
from relay.web.front import ApiFront
from relay.web.idempotency import IdempotencyMiddleware, Keys
from relay.web.middleware import Edge, EdgeMiddleware
from relay.web.openapi import build_document
from relay.web.operations import Call, Operation
from relay.web.ratelimit import RateLimitMiddleware, RateLimits
from relay.web.readiness import Readiness
from relay.web.responses import JsonResponse
from relay.web.route_names import RouteNames
from relay.worker.background import Background

log = logging.getLogger("relay.app")

# In the order the router tries them: the busiest first.
API: list[Operation] = [
    *routes.OPERATIONS,
    *message_routes.OPERATIONS,
    *event_routes.OPERATIONS,
    *carrier_routes.OPERATIONS,
    *erasure_routes.OPERATIONS,
]


def create_app(services: Services, *, background: bool = True) -> RelayApp:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sends = background and services.settings.serve_background
        await services.delivery.start(dispatch=sends)
        await services.accounts.start()
        work = Background(services) if sends else None
        if work is not None:
            work.start()
        # Supervisors and the e2e tests read these two lines, one per server process.
        log.info("Application startup complete")
        try:
            yield
        finally:
            # Runs after the server has let the requests in flight finish: the jobs
            # they and the loops claimed get a grace of their own.
            grace = services.settings.shutdown_timeout
            if work is not None:
                await work.stop(grace=grace)
            else:
                await services.delivery.drain(grace=grace)
            await services.close()
            log.info("Application shutdown complete")

    document = build_document(API)
    api_routes = router_routes(API, services)
    app = RelayApp(
        routes=[
            *api_routes,
            *router_routes(_pages(document, Readiness.of(services)), services),
            *console.routes(services),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _on_http_error},
    )
    app.state.services = services
    app.state.callback_failures = CallbackFailures.of(services.settings)
    limits = RateLimits(services)
    edge = Edge(
        settings=services.settings,
        route_name=RouteNames(app.routes),
        hsts_seconds=services.settings.hsts_seconds,
    )
    # Added innermost first: Edge (HTTPS, body cap) → per-key rate limit → idempotency
    # → the router. The API's operations take the same steps in one pass (`front`).
    app.add_middleware(IdempotencyMiddleware, services=services)
    app.add_middleware(RateLimitMiddleware, limits=limits)
    app.add_middleware(
        EdgeMiddleware,
        settings=edge.settings,
        route_name=edge.route_name,
        hsts_seconds=services.settings.hsts_seconds,
    )
    app.front = ApiFront(api_routes, edge=edge, limits=limits, keys=Keys(services))
    return app


class RelayApp(Starlette):
    """Starlette, with the API's operations answered by `ApiFront` in one pass."""

    front: ApiFront | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        front = self.front
        found = None if front is None else front.find(scope)
        if front is None or found is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        await front(scope, receive, send, found)


def _pages(document: dict[str, Any], readiness: Readiness) -> list[Operation]:
    """Served without a key and outside the document. Listed after the API, whose routes
    the one pass finds only because no route before them can match their paths."""
    openapi = orjson.dumps(document)
    reference = api_page(document)
    errors = errors_page()

    async def healthz(call: Call) -> Response:
        return JsonResponse({"ok": True})

    async def readyz(call: Call) -> Response:
        return await readiness.answer(base_url=base_url(call.scope, call.services.settings))

    async def openapi_json(call: Call) -> Response:
        return Response(openapi, media_type="application/json")

    async def api_reference(call: Call) -> Response:
        return HTMLResponse(reference)

    async def error_reference(call: Call) -> Response:
        return HTMLResponse(errors)

    return [
        Operation("GET", "/healthz", healthz, "healthz", authenticated=False, in_schema=False),
        Operation("GET", "/readyz", readyz, "readyz", authenticated=False, in_schema=False),
        metrics_route.OPERATION,
        Operation(
            "GET", "/v1/openapi.json", openapi_json, "openapi", authenticated=False, in_schema=False
        ),
        Operation("GET", "/docs", api_reference, "docs", authenticated=False, in_schema=False),
        Operation(
            "GET", "/docs/errors", error_reference, "errors", authenticated=False, in_schema=False
        ),
    ]


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """What the router itself refuses: no such path, or a method the path does not take."""
    assert isinstance(exc, HTTPException)
    allow = (exc.headers or {}).get("Allow")
    if allow is not None:
        # Starlette lists a route's methods from a set: an order of its own per process.
        allow = ", ".join(sorted(method.strip() for method in allow.split(",")))
    error: e.RelayError
    if exc.status_code == 405:
        error = e.MethodNotAllowed(f"{request.method} is not allowed here; use {allow}.")
    else:
        error = e.RouteNotFound(f"No route {request.method} {request.url.path}.")
    return error_response(
        error, base_url=base_url(request.scope, request.app.state.services.settings), allow=allow
    )
