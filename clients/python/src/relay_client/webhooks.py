"""Check that a webhook delivery comes from Relay before trusting its event.

Relay signs each delivery in the `Relay-Signature` header,
`t=<unix time>, v1=<hex>[, v1=<hex>...]`: `v1` is the HMAC-SHA256, keyed by
the account's signing secret (`whsec_...`, prefix included), of `<t>.`
followed by the raw request body. During a secret roll there is one `v1` per
active secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import cast

from relay_client.errors import SignatureVerificationError
from relay_client.objects import WebhookEvent

HEADER = "Relay-Signature"
DEFAULT_TOLERANCE = 300


def verify(
    payload: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    tolerance: int = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> WebhookEvent:
    """The delivered event, once its signature and age check out.

    `payload` must be the raw body as received, before any JSON parsing: a
    re-serialised body no longer matches. `headers` is any mapping of the
    request's headers (names in any case). Raises `SignatureVerificationError`.
    """
    body = payload.encode() if isinstance(payload, str) else payload
    timestamp, candidates = _parse(_header(headers))
    expected = _digest(body, secret, timestamp)
    if not _any_matches(expected, candidates):
        raise SignatureVerificationError("No v1 signature matches the payload and secret.")
    current = time.time() if now is None else now
    # Both ways: a timestamp from the future is as suspect as an old one.
    if abs(current - timestamp) > tolerance:
        raise SignatureVerificationError(
            f"Signature timestamp {timestamp} is more than {tolerance} s from now."
        )
    return _event(body)


def _header(headers: Mapping[str, str]) -> str:
    wanted = HEADER.lower()
    for name, value in headers.items():
        if name.lower() == wanted:
            return value
    raise SignatureVerificationError(f"No {HEADER} header.")


def _parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        scheme, _, value = item.strip().partition("=")
        if scheme == "t":
            if timestamp is not None or not (value.isascii() and value.isdigit()):
                raise SignatureVerificationError(f"Bad timestamp in {HEADER}.")
            timestamp = int(value)
        elif scheme == "v1" and value:
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureVerificationError(f"{HEADER} needs a t= and at least one v1=.")
    return timestamp, candidates


def _digest(body: bytes, secret: str, timestamp: int) -> str:
    signed = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def _any_matches(expected: str, candidates: list[str]) -> bool:
    # Constant time, and no early exit: timing tells neither the digest nor which matched.
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(expected.encode(), candidate.encode())
    return matched


def _event(body: bytes) -> WebhookEvent:
    try:
        event = json.loads(body)
    except ValueError as error:
        raise SignatureVerificationError("The signed payload is not JSON.") from error
    if not isinstance(event, dict) or "id" not in event or "type" not in event:
        raise SignatureVerificationError("The signed payload is not a Relay event.")
    return cast(WebhookEvent, event)
