"""What `Relay` and `AsyncRelay` share: settings, the request on the wire, reading the
answer. Only the transport call and the sleep differ between them."""

from __future__ import annotations

import json
import os
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from relay_client.calls import Call
from relay_client.errors import (
    APIConnectionError,
    APIError,
    RelayError,
    error_from_answer,
)
from relay_client.retries import RetryPolicy
from relay_client.version import VERSION

DEFAULT_BASE_URL = "https://127.0.0.1:8443"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
Verify = bool | str | ssl.SSLContext
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True)
class Outgoing:
    """One request as sent, identical on every try: the idempotency key included."""

    method: str
    url: str
    # Out of repr: it holds the API key, and reprs end up in logs and tracebacks.
    headers: Mapping[str, str] = field(repr=False)
    params: Mapping[str, str]
    content: bytes | None


@dataclass(frozen=True)
class Core:
    api_key: str = field(repr=False)
    base_url: str
    policy: RetryPolicy

    @classmethod
    def configure(cls, api_key: str | None, base_url: str | None, max_retries: int) -> Core:
        key = api_key if api_key is not None else os.environ.get("RELAY_API_KEY")
        if not key:
            raise ValueError("No API key: pass api_key= or set RELAY_API_KEY.")
        if max_retries < 0:
            raise ValueError("max_retries cannot be negative")
        url = base_url or os.environ.get("RELAY_BASE_URL") or DEFAULT_BASE_URL
        return cls(key, _origin(url), RetryPolicy(max_retries=max_retries))

    def prepare(self, call: Call) -> Outgoing:
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            "Accept": "application/json",
            "User-Agent": f"relay-client-python/{VERSION}",
        }
        content = None
        if call.method == "POST":
            headers["Content-Type"] = "application/json"
            headers["Idempotency-Key"] = call.idempotency_key or new_idempotency_key()
            content = json.dumps(call.body or {}, separators=(",", ":")).encode()
        return Outgoing(call.method, self.base_url + call.path, headers, call.params, content)

    def read(self, response: httpx.Response) -> Any:
        """The answer's JSON body, or the exception it stands for."""
        headers = _lowered(response.headers)
        request_id = headers.get("request-id")
        body = _json_or_none(response.content)
        if response.is_success and isinstance(body, dict):
            return body
        if response.is_success:
            raise APIError(
                "Relay answered without a JSON object.",
                request_id=request_id,
                http_status=response.status_code,
                headers=headers,
            )
        raise error_from_answer(response.status_code, body, headers, request_id)

    def retry_delay(self, attempt: int, response: httpx.Response) -> float | None:
        body = _json_or_none(response.content)
        detail = body.get("error") if isinstance(body, dict) else None
        code = detail.get("code") if isinstance(detail, dict) else None
        return self.policy.after_response(
            attempt, response.status_code, _lowered(response.headers), code
        )

    def retry_delay_after_error(self, attempt: int, error: httpx.TransportError) -> float:
        """Seconds to wait, or the `APIConnectionError` to raise when out of tries."""
        delay = self.policy.after_error(attempt, error)
        if delay is None:
            raise _connection_error(error) from error
        return delay


def new_idempotency_key() -> str:
    return f"rc_{uuid.uuid4().hex}"


def tls_verify(verify: Verify) -> bool | ssl.SSLContext:
    """httpx wants a context for a CA bundle; a path is the common way to name one."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify


def _origin(base_url: str) -> str:
    parts = urlsplit(base_url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"base_url must be an https:// URL, not {base_url!r}")
    # Plain HTTP would carry the API key in clear; only a loopback twin may use it.
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK:
        raise ValueError("Relay accepts HTTPS only: base_url must start with https://")
    # The spec's `{base_url}` ends in /v1 while paths carry it too: accept both forms.
    return base_url.rstrip("/").removesuffix("/v1")


def _lowered(headers: httpx.Headers) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _connection_error(error: httpx.TransportError) -> RelayError:
    kind = type(error).__name__
    detail = str(error) or "no detail"
    return APIConnectionError(f"Could not get an answer from Relay ({kind}: {detail}).")
