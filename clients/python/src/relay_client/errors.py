"""What the client raises: one class per kind of failure, all under `RelayError`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RelayError(Exception):
    """Base of every error this package raises.

    For an answer from the API, the fields come from its error body
    (`{"error": {"type", "code", "message", "param", "doc_url"}}`) and its
    `Request-Id` header; quote `request_id` when asking the operator about it.
    """

    def __init__(
        self,
        message: str,
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        doc_url: str | None = None,
        request_id: str | None = None,
        http_status: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.doc_url = doc_url
        self.request_id = request_id
        self.http_status = http_status
        self.headers: Mapping[str, str] = dict(headers or {})

    def __str__(self) -> str:
        where = f" (request {self.request_id})" if self.request_id else ""
        what = f"{self.http_status} {self.code}: " if self.code else ""
        return f"{what}{self.message}{where}"


class InvalidRequestError(RelayError):
    """The request cannot succeed as sent (400, 403, 405, 413, 415, 422)."""


class AuthenticationError(RelayError):
    """The API key is missing, malformed, unknown or revoked (401)."""


class NotFoundError(RelayError):
    """No such object for this key's account and mode, or no such route (404)."""


class ConflictError(RelayError):
    """The object's state forbids the request, e.g. checking an approved verification,
    or a request with the same idempotency key is still running (409)."""


class RateLimitError(RelayError):
    """Too many requests, sends or checks (429); `retry_after` says when to try again."""

    @property
    def retry_after(self) -> float | None:
        return parse_retry_after(self.headers.get("retry-after"))


class APIError(RelayError):
    """Relay failed or cannot serve the request now (5xx), or answered in a way the
    client does not understand."""


class APIConnectionError(APIError):
    """No answer from Relay: connection refused, cut, timed out, or TLS failed."""


class SignatureVerificationError(RelayError):
    """A webhook delivery is not provably from Relay with this secret, or is too old."""


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header; Relay sends whole seconds, never dates."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


# Status decides first where it is more telling than the type (both 404 and 409
# carry `invalid_request_error`); the type decides for the rest.
_BY_STATUS: dict[int, type[RelayError]] = {
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    429: RateLimitError,
}
_BY_TYPE: dict[str, type[RelayError]] = {
    "invalid_request_error": InvalidRequestError,
    "idempotency_error": InvalidRequestError,
    "authentication_error": AuthenticationError,
    "rate_limit_error": RateLimitError,
    "api_error": APIError,
}


def error_class(status: int, error_type: str | None) -> type[RelayError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return APIError
    return _BY_TYPE.get(error_type or "", InvalidRequestError)


def error_from_answer(
    status: int, body: Any, headers: Mapping[str, str], request_id: str | None
) -> RelayError:
    """The exception for a non-2xx answer, whatever its body holds."""
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        return APIError(
            f"Relay answered HTTP {status} without an error body.",
            request_id=request_id,
            http_status=status,
            headers=headers,
        )
    error_type = _text(detail.get("type"))
    cls = error_class(status, error_type)
    return cls(
        _text(detail.get("message")) or f"HTTP {status}",
        type=error_type,
        code=_text(detail.get("code")),
        param=_text(detail.get("param")),
        doc_url=_text(detail.get("doc_url")),
        request_id=request_id,
        http_status=status,
        headers=headers,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
