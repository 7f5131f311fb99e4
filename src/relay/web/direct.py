"""The busiest routes, dispatched without FastAPI's per-request machinery.

Verifications (create, check, retrieve) and messages (send, retrieve) carry
nearly all of a deployment's traffic, and FastAPI's route search, dependency
solving and request wrappers cost a quarter of a create's CPU and two fifths
of a check's (docs/decisions.md). This layer sits inside the idempotency
middleware, recognises exactly those requests and runs the same route
functions (`relay.web.routes`, `relay.web.message_routes`) with what FastAPI
would have given them: the caller, and the JSON body validated by the same
model with the same rules, in the same order (an undecodable body, then
authentication, then the fields). Every other request, HEAD included, goes on
to FastAPI, which still declares all the routes for the OpenAPI document.
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
from relay.web import message_routes, routes
from relay.web.bodies import read_body
from relay.web.callers import base_url, scope_caller
from relay.web.errors import error_response, translate_validation
from relay.web.schemas import CheckVerificationBody, CreateVerificationBody, SendMessageBody

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
        self,
        scope: Scope,
        receive: Receive,
        handler: Handler,
        model: type[BaseModel] | None,
        object_id: str,
    ) -> Response:
        if model is None:
            caller = await self._caller(scope)
            return await handler(self.services, caller, object_id)
        document = _decoded(await read_body(receive))
        caller = await self._caller(scope)
        return await handler(self.services, caller, _validated(model, document))

    async def _caller(self, scope: Scope) -> Caller:
        caller = await scope_caller(scope, self.services.accounts)
        if caller is None:
            raise e.AuthenticationFailed()
        return caller


_POSTS: dict[str, tuple[Handler, type[BaseModel]]] = {
    "/v1/verifications": (routes.create, CreateVerificationBody),
    "/v1/verifications/check": (routes.check, CheckVerificationBody),
    "/v1/messages": (message_routes.send, SendMessageBody),
}
# Prefix, then one path segment: the object's id (FastAPI's `{..._id}`).
_GETS: tuple[tuple[str, Handler], ...] = (
    ("/v1/verifications/", routes.retrieve),
    ("/v1/messages/", message_routes.retrieve),
)


def _route(scope: Scope) -> tuple[Handler, type[BaseModel] | None, str] | None:
    method, path = scope["method"], scope["path"]
    if method == "POST":
        found = _POSTS.get(path)
        return None if found is None else (*found, "")
    if method == "GET":
        for prefix, handler in _GETS:
            if path.startswith(prefix):
                object_id = path[len(prefix) :]
                if object_id and "/" not in object_id:
                    return handler, None, object_id
    return None


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
