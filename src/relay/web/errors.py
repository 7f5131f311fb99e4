"""The one place that maps domain errors to HTTP answers."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.responses import Response

from relay import errors as e
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
    (e.NotReady, 503, "api_error"),
    (e.DatabaseUnreachable, 503, "api_error"),
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


def error_response(error: e.RelayError, *, base_url: str, allow: str | None = None) -> Response:
    status, _ = status_and_type(error)
    headers: dict[str, str] = {}
    if allow is not None:
        headers["Allow"] = allow
    if isinstance(error, e.AuthenticationFailed):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, e.RateLimitError):
        headers["Retry-After"] = str(error.retry_after)
    if isinstance(error, e.DatabaseUnreachable):
        headers["Retry-After"] = "1"
    return JsonResponse(error_body(error, base_url=base_url), status_code=status, headers=headers)


def translate_validation(exc: ValidationError, *, where: str) -> e.RelayError:
    """The refusal for the first problem pydantic found in the body or the query."""
    first = exc.errors(include_url=False)[0]
    kind = first["type"]
    location = [str(part) for part in first["loc"]]
    param = ".".join(location) or None
    text = first["msg"]
    if kind == "missing":
        return e.ParameterMissing(f"Missing required parameter: {param}.", param=param)
    if kind == "extra_forbidden":
        return e.ParameterUnknown(f"Received unknown parameter: {param}.", param=param)
    if param is None:
        return e.ParameterInvalid("The request body must be a JSON object.")
    if param == "to" and kind == "string_pattern_mismatch" and where == "body":
        return e.PhoneNumberInvalid(
            "The number must be in E.164 form, such as +14155552671.", param="to"
        )
    return e.ParameterInvalid(f"Invalid {param}: {text}", param=param)
