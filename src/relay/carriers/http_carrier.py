"""What every HTTP SMS provider shares: one carrier, with each provider's shapes plugged in.

A provider module describes only its own protocol through `Provider`: the
request of one send, how to read its answer, how its callbacks are signed and
what they say. This module does the rest the same way for all of them: the
HTTP client, timeouts, the mapping of answers to Relay's outcomes (refused →
`CarrierRejected`; unreachable, 5xx, bad credentials → `CarrierUnavailable`;
429 or the provider's throttling code → `CarrierThrottled` after its
`Retry-After`), segment counting, and turning verified callbacks into reports.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import httpx

from relay.carriers.base import (
    CarrierError,
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    Channel,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    ReportStatus,
    SubmitReceipt,
)
from relay.carriers.callbacks import (
    CallbackPayloadError,
    CallbackSignatureError,
    Nonce,
    NonceLedger,
    SeenNonces,
    StatusCallback,
    callback_url,
)
from relay.carriers.retry_after import retry_after
from relay.sms.encoding import segment_count

__all__ = [
    "Accepted",
    "Answer",
    "FinalStates",
    "HttpCarrier",
    "HttpSettings",
    "OptionallySignedSettings",
    "Outcome",
    "Provider",
    "ProviderRequest",
    "Refused",
    "SignedSettings",
    "StatusUpdate",
    "is_http_url",
]

_log = logging.getLogger(__name__)

# Statuses that say the account itself is wrong (credentials, account id), not this SMS.
_NOT_BOUND_STATUSES = frozenset({401, 404})

Outcome = Literal["rejected", "unavailable", "throttled"]


@dataclass(frozen=True)
class ProviderRequest:
    """One send as the provider documents it: a path and a JSON or form body."""

    path: str
    json: Mapping[str, Any] | None = None
    form: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Answer:
    """The provider's answer to a send; `body` is {} when it is not a JSON object."""

    status: int
    reason: str
    headers: httpx.Headers
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True)
class Accepted:
    """The provider took the SMS; `segments` as it bills them when it says so."""

    message_id: str
    segments: int | None = None
    status: str | None = None


@dataclass(frozen=True)
class Refused:
    """The provider did not take the SMS; `outcome` None lets the HTTP status decide."""

    code: str
    message: str
    outcome: Outcome | None = None
    # Seconds to wait when throttled, if the provider says so other than by Retry-After.
    retry_after: float | None = None


@dataclass(frozen=True)
class StatusUpdate:
    """What one callback says of one message; `status` None is progress."""

    message_id: str
    status: ReportStatus | None
    error_code: str | None = None


@dataclass(frozen=True)
class FinalStates:
    """A provider's final statuses; every other status is progress, or says nothing."""

    delivered: frozenset[str]
    failed: frozenset[str]

    def update(self, message_id: str, status: str | None, error_code: str | None) -> StatusUpdate:
        if status in self.delivered:
            return StatusUpdate(message_id, "delivered")
        if status in self.failed:
            return StatusUpdate(message_id, "failed", error_code)
        return StatusUpdate(message_id, None)


class Provider(Protocol):
    """One provider's protocol; `label` prefixes its error codes (`telnyx_10009`)."""

    label: str
    headers: Mapping[str, str]
    auth: httpx.Auth | None

    def request(self, sms: OutboundSms) -> ProviderRequest: ...

    def read_answer(self, answer: Answer) -> Accepted | Refused: ...

    def verify(self, callback: StatusCallback, *, now: datetime) -> Nonce | None:
        """Raise `CallbackSignatureError` unless the provider signed this callback; the
        nonce no other callback may carry, where the scheme signs one and no time."""

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]: ...


class HttpCarrier:
    """An SMS carrier reached over one provider's HTTP API."""

    # What a believed callback is answered with; providers retry anything but a 2xx.
    callback_answer = 204

    def __init__(
        self,
        provider: Provider,
        settings: HttpSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._provider = provider
        self._settings = settings
        self._clock = clock or _utc_now
        self._reports: ReportSink | None = None
        self._seen = SeenNonces()
        self._client = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/"),
            auth=provider.auth,
            headers={"Accept": "application/json", **provider.headers},
            timeout=settings.timeout,
            transport=transport,
            follow_redirects=False,
        )

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def channel(self) -> Channel:
        return "sms"

    @property
    def status_callback_url(self) -> str:
        return self._settings.status_callback_url

    async def start(self, reports: ReportSink) -> None:
        self._reports = reports

    async def close(self) -> None:
        await self._client.aclose()

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        answer = await self._send(self._provider.request(sms))
        read = self._provider.read_answer(answer)
        if isinstance(read, Accepted) and answer.ok:
            return self._accepted(read, sms)
        if isinstance(read, Accepted):
            read = Refused(f"{self._provider.label}_http_{answer.status}", answer.reason)
        raise self._refusal(read, answer, sms)

    async def receive_status(
        self, callback: StatusCallback, *, nonces: NonceLedger | None = None
    ) -> None:
        """Verify one callback, then pass its final statuses on to the sink. Nothing is
        read or written before the signature holds; a signed nonce is then taken once in
        `nonces` (None: this process's own), and given back if the reports cannot be
        recorded, so that the provider's retry is taken."""
        now = self._clock()
        try:
            once = self._provider.verify(callback, now=now)
        except CallbackPayloadError as exc:
            # Nothing unsigned is read as a payload: a body too broken to check
            # the signature of is an unsigned callback, answered as one.
            raise CallbackSignatureError(f"the signature cannot be checked: {exc}") from exc
        updates = self._provider.read_callback(callback)
        if once is None:
            await self._report(updates, now)
            return
        ledger = self._seen if nonces is None else nonces
        until = now + timedelta(seconds=once.window)
        if not await ledger.first_use(self.name, once.value, now=now, until=until):
            raise CallbackSignatureError("the callback's nonce was used before: a replay")
        try:
            await self._report(updates, now)
        except Exception:
            await ledger.forget(self.name, once.value)
            raise

    async def _report(self, updates: list[StatusUpdate], now: datetime) -> None:
        for update in updates:
            if update.status is None:
                continue
            if self._reports is None:
                raise RuntimeError(f"carrier {self.name} received a report before start()")
            report = DeliveryReport(
                self.name, update.message_id, update.status, update.error_code, now
            )
            await self._reports(report)

    async def _send(self, request: ProviderRequest) -> Answer:
        label = self._provider.label
        try:
            async with asyncio.timeout(self._settings.timeout):
                response = await self._client.post(
                    request.path, json=request.json, data=request.form
                )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise CarrierUnavailable(f"{label}_unreachable", _describe(label, exc)) from exc
        except (TimeoutError, httpx.TimeoutException) as exc:
            # The provider may have accepted (and will bill) this SMS: whoever
            # fails over on this code risks sending the user a second one.
            raise CarrierUnavailable(f"{label}_timeout", _describe(label, exc)) from exc
        except httpx.HTTPError as exc:
            raise CarrierUnavailable(f"{label}_unreachable", _describe(label, exc)) from exc
        return Answer(
            response.status_code, response.reason_phrase, response.headers, _body(response)
        )

    def _accepted(self, accepted: Accepted, sms: OutboundSms) -> SubmitReceipt:
        # Every segment is billed: when the provider does not say, count as it will.
        segments = accepted.segments or segment_count(sms.body)
        _log.info(
            "%s accepted carrier=%s attempt=%s id=%s status=%s segments=%s",
            self._provider.label,
            self.name,
            sms.attempt_id,
            accepted.message_id,
            accepted.status,
            segments,
        )
        return SubmitReceipt(carrier_message_id=accepted.message_id, segments=segments)

    def _refusal(self, refused: Refused, answer: Answer, sms: OutboundSms) -> CarrierError:
        _log.warning(
            "%s refused carrier=%s attempt=%s http=%s code=%s",
            self._provider.label,
            self.name,
            sms.attempt_id,
            answer.status,
            refused.code,
        )
        outcome = refused.outcome or _outcome_of(answer.status)
        if outcome == "throttled":
            wait = refused.retry_after
            if wait is None:
                default = self._settings.throttle_retry_after
                wait = retry_after(answer.headers, now=self._clock(), default=default)
            return CarrierThrottled(refused.code, refused.message, retry_after=wait)
        if outcome == "rejected":
            return CarrierRejected(refused.code, refused.message)
        return CarrierUnavailable(refused.code, refused.message)


def _outcome_of(status: int) -> Outcome:
    if status == 429:
        return "throttled"
    if 400 <= status < 500 and status not in _NOT_BOUND_STATUSES:
        return "rejected"
    return "unavailable"


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _describe(label: str, exc: Exception) -> str:
    # httpx messages name the URL, never the body, so they carry no code.
    return f"{label} did not answer: {type(exc).__name__}: {exc}".rstrip(": ")


def is_http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in {"http", "https"} and bool(parts.netloc)


@dataclass(frozen=True, kw_only=True)
class HttpSettings:
    """What every HTTP provider's settings hold; each adds its credentials and sender.

    `status_callback_url` is the public URL of Relay's callback route for this
    carrier, exactly as the provider will request it (some sign it).
    """

    name: str
    status_callback_url: str
    base_url: str
    timeout: float = 10.0
    throttle_retry_after: float = 1.0

    def __post_init__(self) -> None:
        checks = {
            "name must not be empty": bool(self.name),
            "base_url must be an http(s) URL": is_http_url(self.base_url),
            "status_callback_url must be an http(s) URL": is_http_url(self.status_callback_url),
            "timeout must be positive": math.isfinite(self.timeout) and self.timeout > 0,
            "throttle_retry_after must not be negative": self.throttle_retry_after >= 0,
            **self.checks(),
        }
        for message, passed in checks.items():
            if not passed:
                raise ValueError(f"{type(self).__name__}: {message}")

    def checks(self) -> dict[str, bool]:
        """The provider's own checks: message → passed."""
        return {}


@dataclass(frozen=True, kw_only=True)
class SignedSettings(HttpSettings):
    """Settings of a provider whose callbacks carry their signing time: Relay refuses
    one signed more than `signature_tolerance` seconds away, so it cannot be replayed."""

    signature_tolerance: float = 300.0

    def checks(self) -> dict[str, bool]:
        return {"signature_tolerance must be positive": self.signature_tolerance > 0}


@dataclass(frozen=True, kw_only=True)
class OptionallySignedSettings(SignedSettings):
    """Settings of a provider that signs callbacks only when the account is set up to.

    With `signature_secret` Relay checks the provider's signature; otherwise the
    callback URL the provider is given carries `callback_secret`.
    """

    signature_secret: str | None = field(default=None, repr=False)
    callback_secret: str | None = field(default=None, repr=False)

    @property
    def provider_callback_url(self) -> str:
        """The callback URL to give the provider, with `callback_secret` when unsigned."""
        return callback_url(
            self.status_callback_url,
            signature_secret=self.signature_secret,
            callback_secret=self.callback_secret,
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)
