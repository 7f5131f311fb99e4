"""The `Relay-Signature` header: `t=<unix>, v1=<hex>[, v1=<hex>...]`.

`v1` is the hex HMAC-SHA256 of `f"{t}."` followed by the raw body, keyed by
the UTF-8 bytes of the signing secret (its `whsec_` prefix included). The
secrets are those of the event's mode, never the other mode's: a test secret
must not sign a live event. During a secret roll there is one `v1` per active
secret of that mode, so receivers holding either secret accept the delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

HEADER = "Relay-Signature"
DEFAULT_TOLERANCE = 300


class WebhookVerificationError(ValueError):
    """The delivery is not provably from Relay, or is too old or too new."""


def sign(payload: bytes, secrets: Sequence[str], *, timestamp: int) -> str:
    """The `Relay-Signature` header value for `payload` sent at `timestamp`."""
    if not secrets:
        raise ValueError("at least one signing secret is needed")
    signatures = ", ".join(f"v1={_digest(payload, secret, timestamp)}" for secret in secrets)
    return f"t={timestamp}, {signatures}"


def verify(
    payload: bytes,
    header: str,
    secret: str,
    tolerance: int = DEFAULT_TOLERANCE,
    *,
    now: float | None = None,
) -> None:
    """Raise `WebhookVerificationError` unless `header` signs `payload` with `secret`.

    `payload` must be the raw request body, before any JSON parsing.
    """
    timestamp, candidates = _parse(header)
    if not _any_matches(_digest(payload, secret, timestamp), candidates):
        raise WebhookVerificationError("no v1 signature matches the payload and secret")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise WebhookVerificationError(
            f"timestamp {timestamp} is more than {tolerance} s away from now"
        )


def _digest(payload: bytes, secret: str, timestamp: int) -> str:
    signed = f"{timestamp}.".encode() + payload
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def _any_matches(expected: str, candidates: Sequence[str]) -> bool:
    # Constant-time compare against every candidate, without stopping at the
    # first match, so timing reveals neither the digest nor which one matched.
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(expected.encode(), candidate.encode())
    return matched


def _parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header.split(","):
        scheme, sep, value = item.strip().partition("=")
        if not sep or not scheme or not value:
            raise WebhookVerificationError(f"malformed signature header element {item!r}")
        if scheme == "t":
            timestamp = _parse_timestamp(value, seen=timestamp is not None)
        elif scheme == "v1":
            candidates.append(value)
    if timestamp is None:
        raise WebhookVerificationError("signature header has no t= timestamp")
    if not candidates:
        raise WebhookVerificationError("signature header has no v1= signature")
    return timestamp, candidates


def _parse_timestamp(value: str, *, seen: bool) -> int:
    if seen:
        raise WebhookVerificationError("signature header has more than one t= timestamp")
    # isdigit() alone accepts non-ASCII digits; int() alone accepts "+1", " 1", "1_0".
    if not (value.isascii() and value.isdigit()):
        raise WebhookVerificationError(f"signature timestamp {value!r} is not a unix time")
    return int(value)
