"""Status callbacks from HTTP providers, as received, and what verifying them shares.

Each provider signs its callbacks its own way (or not at all); the checks every
scheme needs live here: a constant-time compare, a timestamp window against
replays, a nonce that may be used once where a scheme signs no time, and the
per-carrier secret a callback URL carries for providers that sign nothing.
"""

from __future__ import annotations

import hmac
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import orjson

__all__ = [
    "MAX_NONCE",
    "SECRET_PARAM",
    "AnswersSubscriptionHandshake",
    "CallbackError",
    "CallbackPayloadError",
    "CallbackSignatureError",
    "Nonce",
    "NonceLedger",
    "ReceivesStatusCallbacks",
    "SeenNonces",
    "StatusCallback",
    "callback_url",
    "check_fresh",
    "check_url_secret",
    "same_text",
    "url_with_secret",
]

# The query parameter of a callback URL that carries the carrier's secret.
SECRET_PARAM = "relay_secret"  # noqa: S105 (the name of a parameter, not a secret)
# The longest nonce kept (`callback_nonces.nonce`); providers send 20 to 40 characters.
MAX_NONCE = 128


class CallbackError(Exception):
    """A status callback that must not be believed."""


class CallbackSignatureError(CallbackError):
    """Unsigned, signed with another key, or signed too long ago."""


class CallbackPayloadError(CallbackError):
    """A correctly signed callback that lacks the fields a status report needs."""


@dataclass(frozen=True)
class StatusCallback:
    """One callback request as it arrived: the bytes providers sign, untouched.

    `url` is the callback URL Relay gave the provider (what it signs), not the
    one a proxy may have rewritten; `headers` have lower-case names.
    """

    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def form(self) -> dict[str, str]:
        return dict(parse_qsl(self.text(), keep_blank_values=True))

    def json(self) -> dict[str, Any]:
        # orjson refuses what would break a reader later, before anything is built:
        # invalid UTF-8, lone surrogates, and nesting past 1024 levels (where the
        # standard library's decoder would raise RecursionError).
        try:
            document = orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise CallbackPayloadError("the callback body is not JSON") from exc
        if not isinstance(document, dict):
            raise CallbackPayloadError("the callback body is not a JSON object")
        return document

    def text(self) -> str:
        try:
            return self.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CallbackPayloadError("the callback body is not UTF-8") from exc

    def is_json(self) -> bool:
        media_type = (self.header("content-type") or "").split(";")[0].strip().lower()
        return media_type == "application/json" or media_type.endswith("+json")


@dataclass(frozen=True)
class Nonce:
    """A value the provider signed that no other callback may carry within `window` seconds:
    what stops a replay where the signature covers no time (Plivo's)."""

    value: str
    window: float


class NonceLedger(Protocol):
    """Where the nonces of verified callbacks are kept for their window, per carrier.

    `first_use` records `nonce` until `until` and answers whether it was new, in one
    atomic step, so two processes given the same callback cannot both take it.
    """

    async def first_use(
        self, carrier: str, nonce: str, *, now: datetime, until: datetime
    ) -> bool: ...

    async def forget(self, carrier: str, nonce: str) -> None: ...


class SeenNonces:
    """A `NonceLedger` of one process, for a carrier used without Relay's database
    (the server passes the database's, which every process shares)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        self._order: deque[tuple[datetime, tuple[str, str]]] = deque()

    async def first_use(self, carrier: str, nonce: str, *, now: datetime, until: datetime) -> bool:
        while self._order and self._order[0][0] < now:
            self._seen.discard(self._order.popleft()[1])
        key = (carrier, nonce)
        if key in self._seen:
            return False
        self._seen.add(key)
        self._order.append((until, key))
        return True

    async def forget(self, carrier: str, nonce: str) -> None:
        self._seen.discard((carrier, nonce))


@runtime_checkable
class ReceivesStatusCallbacks(Protocol):
    """A carrier that takes status callbacks at `POST /v1/carriers/{name}/status`, and
    answers a believed one with `callback_answer` (the status its provider asks for)."""

    @property
    def status_callback_url(self) -> str: ...

    @property
    def callback_answer(self) -> int: ...

    async def receive_status(
        self, callback: StatusCallback, *, nonces: NonceLedger | None = None
    ) -> None: ...


@runtime_checkable
class AnswersSubscriptionHandshake(Protocol):
    """A carrier whose provider checks the callback URL first with a `GET` (Meta's webhooks).

    `answer_handshake` returns the text to answer with, or raises
    `CallbackSignatureError` when the request does not name the carrier's token.
    """

    def answer_handshake(self, query: Mapping[str, str]) -> str: ...


def same_text(expected: str, given: str | None) -> bool:
    """Equal, compared in constant time so timing says nothing of a forgery's near misses."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.strip().encode())


def check_fresh(timestamp: str | None, *, now: datetime, tolerance: float) -> None:
    """Refuse a signature over a unix timestamp further than `tolerance` from `now`.

    A signed callback can be replayed as is; the window bounds for how long.
    """
    try:
        signed_at = float(timestamp or "")
    except ValueError as exc:
        raise CallbackSignatureError("the callback carries no usable timestamp") from exc
    if not math.isfinite(signed_at) or abs(now.timestamp() - signed_at) > tolerance:
        raise CallbackSignatureError("the callback was signed too long ago")


def check_url_secret(callback: StatusCallback, secret: str) -> None:
    """For providers that sign nothing: the URL Relay gave them carries the secret."""
    if not same_text(secret, callback.query.get(SECRET_PARAM)):
        raise CallbackSignatureError("the callback URL does not carry this carrier's secret")


def callback_url(url: str, *, signature_secret: str | None, callback_secret: str | None) -> str:
    """The URL to give a provider: it carries the carrier's secret when nothing is signed."""
    if signature_secret or not callback_secret:
        return url
    return url_with_secret(url, callback_secret)


def url_with_secret(url: str, secret: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), (SECRET_PARAM, secret)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))
