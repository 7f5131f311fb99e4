"""One Starlette route per path of the route table, and what runs a matched request.

Starlette's router finds the path (a path that matches with another method is
405 with `Allow`, from `relay.web.app`'s handler); the endpoint then decodes,
authenticates and validates in a fixed order: an undecodable body first, then
the key, then the query, then the body's fields.
The models checked here are the ones the OpenAPI document is built from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from relay import errors as e
from relay.services import Services
from relay.web.bodies import decode_json, read_body
from relay.web.callers import base_url, scope_caller
from relay.web.errors import error_response, translate_validation
from relay.web.operations import Call, Operation

_MISSING: Any = object()


class PathEndpoint:
    """The ASGI endpoint of one path: every method the route table lists for it."""

    def __init__(self, operations: Iterable[Operation], services: Services) -> None:
        self.services = services
        self.by_method = {operation.method: operation for operation in operations}
        # The template, read for metric labels (`relay.web.route_names`).
        self.path = next(iter(self.by_method.values())).path
        if "GET" in self.by_method:
            self.by_method["HEAD"] = self.by_method["GET"]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The router let only the methods of this path through.
        operation = self.by_method[scope["method"]]
        raw = b""
        if operation.body is not None or operation.raw_body:
            raw = await read_body(receive)
        response = await self.answer(scope, raw)
        await response(scope, receive, send)

    async def answer(self, scope: Scope, raw: bytes) -> Response:
        """The answer of the operation for the scope's method, given the request's body."""
        operation = self.by_method[scope["method"]]
        try:
            return await _run(operation, self.services, scope, raw)
        except e.RelayError as refusal:
            return error_response(refusal, base_url=base_url(scope, self.services.settings))


def routes(operations: Iterable[Operation], services: Services) -> list[Route]:
    """One route per path, in the table's order: a literal path listed before a
    template (`/v1/verifications/check` before `/v1/verifications/{id}`) wins."""
    by_path: dict[str, list[Operation]] = {}
    for operation in operations:
        by_path.setdefault(operation.path, []).append(operation)
    return [
        Route(path, PathEndpoint(found, services), methods=[op.method for op in found])
        for path, found in by_path.items()
    ]


async def _run(operation: Operation, services: Services, scope: Scope, raw: bytes) -> Response:
    document = _MISSING
    if operation.body is not None and raw:
        document = decode_json(raw)
    caller = None
    if operation.authenticated:
        caller = await scope_caller(scope, services)
        if caller is None:
            raise e.AuthenticationFailed()
    query = _query(operation, scope) if operation.in_schema else None
    body = _body(operation, document)
    path = scope.get("path_params", {})
    return await operation.handler(Call(services, scope, caller, path, body, query, raw))


def _query(operation: Operation, scope: Scope) -> BaseModel | None:
    text = scope["query_string"]
    model = operation.query
    if not text:
        return None if model is None else model.model_validate({})
    items = QueryParams(text).multi_items()
    if model is None:
        name = items[0][0] if items else ""
        if name:
            raise e.ParameterUnknown(f"Received unknown parameter: {name}.", param=name)
        return None
    values: dict[str, str] = {}
    for name, value in items:
        if name in values:
            raise e.ParameterInvalid(f"{name} may be given only once.", param=name)
        values[name] = value
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise translate_validation(exc, where="query") from None


def _body(operation: Operation, document: Any) -> BaseModel | None:
    model = operation.body
    if model is None:
        return None
    if document is _MISSING:
        if operation.body_required:
            raise e.ParameterMissing("The request needs a JSON object body.")
        return None
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise translate_validation(exc, where="body") from None
