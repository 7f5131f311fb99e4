"""The ASGI application: FastAPI at the edge, everything else behind `Services`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse, Response

from relay.delivery.loop import run_dispatch
from relay.errors import RelayError
from relay.events.delivery import run_delivery
from relay.services import Services
from relay.web import errors as error_map
from relay.web.carrier_routes import router as carrier_router
from relay.web.direct import DirectRoutes
from relay.web.docs import api_page, errors_page
from relay.web.event_routes import router as event_router
from relay.web.idempotency import IdempotencyMiddleware, document_header
from relay.web.message_routes import router as message_router
from relay.web.middleware import EdgeMiddleware
from relay.web.ratelimit import RateLimitMiddleware
from relay.web.responses import JsonResponse
from relay.web.routes import router
from relay.web.schemas import Health
from relay.worker.sweeper import run_sweeper

log = logging.getLogger("relay.app")


def create_app(services: Services, *, background: bool = True) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = []
        sends = background and services.settings.serve_background
        await services.delivery.start(dispatch=sends)
        if sends:
            tasks.append(asyncio.create_task(run_sweeper(services), name="relay-sweeper"))
            tasks.append(asyncio.create_task(run_delivery(services.events), name="relay-webhooks"))
            tasks.append(
                asyncio.create_task(run_dispatch(services.delivery), name="relay-dispatch")
            )
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await services.close()

    app = FastAPI(
        title="Relay",
        version="1",
        summary="Send one-time passcodes by SMS and check them.",
        openapi_url="/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        default_response_class=JsonResponse,
    )
    app.state.services = services
    # First: a route is found by trying each in turn, and load balancers poll /healthz.
    _add_pages(app)
    app.include_router(router)
    app.include_router(message_router)
    app.include_router(event_router)
    app.include_router(carrier_router)
    app.add_exception_handler(RelayError, error_map.on_relay_error)
    app.add_exception_handler(RequestValidationError, error_map.on_validation_error)
    app.add_exception_handler(HTTPException, error_map.on_http_error)
    app.add_exception_handler(Exception, error_map.on_unexpected)
    # Added innermost first: Edge (HTTPS, body cap) → per-key rate limit → idempotency
    # → create, check and retrieve directly, or FastAPI's routes.
    app.add_middleware(DirectRoutes, services=services)
    app.add_middleware(IdempotencyMiddleware, services=services)
    app.add_middleware(RateLimitMiddleware, services=services)
    app.add_middleware(EdgeMiddleware, trusted_proxies=services.settings.trusted_proxies)
    document_header(app)
    return app


def _add_pages(app: FastAPI) -> None:
    @app.get("/healthz", response_model=Health, include_in_schema=False)
    async def healthz() -> Response:
        return JsonResponse({"ok": True})

    @app.get("/docs/errors", include_in_schema=False)
    async def error_reference() -> Response:
        return HTMLResponse(errors_page())

    @app.get("/docs", include_in_schema=False)
    async def api_reference(request: Request) -> Response:
        return HTMLResponse(api_page(request.app.openapi()))
