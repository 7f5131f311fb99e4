"""When the client tries a request again, as a pure policy: no clock, no sleeping.

Every request the client sends is safe to repeat: GETs by nature, POSTs
because each carries one idempotency key across all of its tries, so Relay
replays the first answer instead of sending a second SMS.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from relay_client.errors import parse_retry_after

# 5xx that may heal by themselves. 501 and 505 will not; 503 `no_route_available`
# is a configuration problem, told apart by its code below.
_RETRYABLE_STATUSES = frozenset({500, 502, 503, 504})
_PERMANENT_CODES = frozenset({"no_route_available"})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    # A longer Retry-After (resend_too_soon is 30 s, max_sends_reached hours) is
    # raised to the caller at once rather than blocking it silently.
    max_retry_after: float = 10.0
    jitter: Callable[[], float] = random.random

    def backoff(self, attempt: int) -> float:
        """Exponential, capped, with jitter so clients cut off together do not return
        together; never below half the nominal delay."""
        nominal = min(self.max_delay, self.initial_delay * 2.0**attempt)
        return nominal * (0.5 + self.jitter() / 2)

    def after_response(
        self, attempt: int, status: int, headers: Mapping[str, str], code: str | None
    ) -> float | None:
        """Seconds to wait before trying again, or None to settle on this answer."""
        if attempt >= self.max_retries or not _worth_retrying(status, code):
            return None
        retry_after = parse_retry_after(headers.get("retry-after"))
        if retry_after is None:
            return self.backoff(attempt)
        return retry_after if retry_after <= self.max_retry_after else None

    def after_error(self, attempt: int, error: httpx.TransportError) -> float | None:
        """Seconds to wait before trying again after no answer at all, or None."""
        if attempt >= self.max_retries or not _transient(error):
            return None
        return self.backoff(attempt)


def _worth_retrying(status: int, code: str | None) -> bool:
    if status == 429:
        return True
    if status == 409:
        # The first try with this key is still running on the server (it may be
        # the one whose answer a cut connection lost): its replay is coming.
        return code == "idempotency_key_in_use"
    return status in _RETRYABLE_STATUSES and code not in _PERMANENT_CODES


def _transient(error: httpx.TransportError) -> bool:
    if isinstance(error, httpx.UnsupportedProtocol | httpx.ProxyError):
        return False
    # A certificate that does not verify will not verify on the next try either.
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return False
        cause = cause.__cause__ or cause.__context__
    return True
