"""The one place that maps domain errors to HTTP answers."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from relay import errors as e
from relay.web.callers import base_url
from relay.web.responses import JsonResponse

# Most specific first: the first class an error is an instance of decides.
_HTTP: list[tuple[type[e.RelayError], int, str]] = [
    (e.AuthenticationFailed, 401, "authentication_error"),
    (e.HttpsRequired, 403, "invalid_request_error"),
    (e.BodyTooLarge, 413, "invalid_request_error"),
    (e.ContentTypeInvalid, 415, "invalid_request_error"),
    (e.InvalidRequest, 400, "invalid_request_error"),
    (e.ResourceMissing, 404, "invalid_request_error"),
    (e.RouteNotFound, 404, "invalid_request_error"),
    (e.MethodNotAllowed, 405, "invalid_request_error"),
    (e.VerificationClosed, 409, "invalid_request_error"),
    (e.IdempotencyKeyInUse, 409, "idempotency_error"),
    (e.IdempotencyKeyReused, 422, "idempotency_error"),
    (e.RateLimitError, 429, "rate_limit_error"),
    (e.NoRouteAvailable, 503, "api_error"),
]


def status_and_type(error: e.RelayError) -> tuple[int, str]:
    for cls, status, kind in _HTTP:
        if isinstance(error, cls):
            return status, kind
    return 500, "api_error"


def error_body(error: e.RelayError, *, base_url: str) -> dict[str, Any]:
    _, kind = status_and_type(error)
    detail: dict[str, Any] = {
        "type": kind,
        "code": error.code,
        "message": error.message,
        "doc_url": f"{base_url}/docs/errors#{error.code}",
    }
    if error.param is not None:
        detail["param"] = error.param
    return {"error": detail}


def error_response(error: e.RelayError, *, base_url: str) -> Response:
    status, _ = status_and_type(error)
    headers: dict[str, str] = {}
    if isinstance(error, e.AuthenticationFailed):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, e.RateLimitError):
        headers["Retry-After"] = str(error.retry_after)
    return JsonResponse(error_body(error, base_url=base_url), status_code=status, headers=headers)


def base_url_of(request: Request) -> str:
    return base_url(request.scope)


async def on_relay_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, e.RelayError)
    return error_response(exc, base_url=base_url_of(request))


async def on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(translate_validation(exc), base_url=base_url_of(request))


async def on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    error: e.RelayError
    if exc.status_code == 405:
        error = e.MethodNotAllowed()
    elif exc.status_code == 404:
        error = e.RouteNotFound(f"No route {request.method} {request.url.path}.")
    else:
        # FastAPI answers 400 itself only when the body cannot be decoded at all.
        error = e.InvalidJson()
    return error_response(error, base_url=base_url_of(request))


async def on_unexpected(request: Request, exc: Exception) -> Response:
    # The trace goes to the log (by the server); the client gets no internals.
    return error_response(e.InternalError(), base_url=base_url_of(request))


def translate_validation(exc: RequestValidationError) -> e.RelayError:
    first: dict[str, Any] = exc.errors()[0]
    kind = str(first.get("type", ""))
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location[1:] if location[:1] == ["query"] else location) or None
    text = str(first.get("msg", "Invalid value."))
    if kind == "json_invalid":
        return e.InvalidJson()
    if kind == "missing":
        if param is None:
            return e.ParameterMissing("The request needs a JSON object body.")
        return e.ParameterMissing(f"Missing required parameter: {param}.", param=param)
    if kind == "extra_forbidden":
        return e.ParameterUnknown(f"Received unknown parameter: {param}.", param=param)
    if param is None:
        return e.ParameterInvalid("The request body must be a JSON object.")
    if param == "to" and kind == "string_pattern_mismatch" and location[:1] != ["query"]:
        return e.PhoneNumberInvalid(
            "The number must be in E.164 form, such as +14155552671.", param="to"
        )
    return e.ParameterInvalid(f"Invalid {param}: {text}", param=param)
