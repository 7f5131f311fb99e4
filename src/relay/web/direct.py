"""The three busiest routes, dispatched without FastAPI's per-request machinery.

Create, check and retrieve carry nearly all of a deployment's traffic. FastAPI's
route search, dependency solving and request wrappers cost about a tenth of a
create's CPU (docs/benchmarks.md). This layer sits inside the idempotency
middleware, recognises exactly those three requests and runs the same route
functions (`relay.web.routes`) with what FastAPI would have given them: the
caller, the JSON body validated by the same model with the same rules, in the
same order (an undecodable body, then authentication, then the fields). Every
other request, HEAD included, goes on to FastAPI, which still declares all
routes for the OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from relay import errors as e
from relay.accounts.models import Caller
from relay.services import Services
from relay.web import routes
from relay.web.callers import base_url, scope_caller
from relay.web.errors import error_response, translate_validation
from relay.web.schemas import CheckVerificationBody, CreateVerificationBody

_VERIFICATIONS = "/v1/verifications"
_ONE = _VERIFICATIONS + "/"
_CHECK = _VERIFICATIONS + "/check"

Handler = Callable[[Services, Caller, Any], Awaitable[Response]]


class DirectRoutes:
    def __init__(self, app: ASGIApp, *, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = _route(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        try:
            response = await self._answer(scope, receive, *found)
        except e.RelayError as refusal:
            response = error_response(refusal, base_url=base_url(scope))
        await response(scope, receive, send)

    async def _answer(
        self, scope: Scope, receive: Receive, handler: Handler, model: type[BaseModel] | None
    ) -> Response:
        if model is None:
            caller = await self._caller(scope)
            return await handler(self.services, caller, scope["path"][len(_ONE) :])
        document = _decoded(await _body(receive))
        caller = await self._caller(scope)
        return await handler(self.services, caller, _validated(model, document))

    async def _caller(self, scope: Scope) -> Caller:
        caller = await scope_caller(scope, self.services.accounts)
        if caller is None:
            raise e.AuthenticationFailed()
        return caller


def _route(scope: Scope) -> tuple[Handler, type[BaseModel] | None] | None:
    method, path = scope["method"], scope["path"]
    if method == "POST":
        if path == _VERIFICATIONS:
            return routes.create, CreateVerificationBody
        if path == _CHECK:
            return routes.check, CheckVerificationBody
    elif method == "GET" and path.startswith(_ONE):
        verification_id = path[len(_ONE) :]
        if verification_id and "/" not in verification_id:
            return routes.retrieve, None
    return None


async def _body(receive: Receive) -> bytes:
    # EdgeMiddleware has already read, capped and replayed the body in one message.
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            return b"".join(chunks)


_MISSING = object()


def _decoded(body: bytes) -> Any:
    """The JSON document, as FastAPI reads it: an empty body is a missing one."""
    if not body:
        return _MISSING
    try:
        return json.loads(body)
    except ValueError as exc:  # JSONDecodeError, or bytes that are no Unicode at all
        raise e.InvalidJson() from exc


def _validated(model: type[BaseModel], document: Any) -> Any:
    """The body model, or the error FastAPI's own validation would have mapped to."""
    if document is _MISSING:
        problems: list[Any] = [{"type": "missing", "loc": ("body",), "msg": "Field required"}]
    else:
        try:
            return model.model_validate(document, from_attributes=True)
        except ValidationError as exc:
            problems = [
                {**problem, "loc": ("body", *problem["loc"])}
                for problem in exc.errors(include_url=False)
            ]
    raise translate_validation(RequestValidationError(problems))
