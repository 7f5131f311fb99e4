"""Twilio Programmable Messaging as a carrier.

Speaks `POST /2010-04-01/Accounts/{AccountSid}/Messages.json` as published in
Twilio's OpenAPI description (`vendor-specs/twilio_api_v2010.json`) and turns
the signed status callbacks Twilio posts back into `DeliveryReport`s.

The HTTP route that receives those callbacks only has to call
`TwilioCarrier.handle_callback` and answer 403 on `CallbackSignatureError`,
400 on `CallbackPayloadError`, 204 otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from relay.carriers.base import (
    CarrierError,
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    SubmitReceipt,
)

__all__ = [
    "CallbackError",
    "CallbackPayloadError",
    "CallbackSignatureError",
    "TwilioCarrier",
    "TwilioSettings",
    "parse_status_callback",
    "twilio_signature",
]

_log = logging.getLogger(__name__)

_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_SERVICE_SID = re.compile(r"MG[0-9a-fA-F]{32}")
_ERROR_CODE = re.compile(r"[0-9A-Za-z]{1,16}")
_DEFAULT_PORTS = {"http": 80, "https": 443}

# Final states of `message_enum_status`; every other state is still moving.
_DELIVERED_STATES = frozenset({"delivered", "read"})
_FAILED_STATES = frozenset({"failed", "undelivered", "canceled"})

# Statuses that say the account itself is wrong, not this SMS.
_NOT_BOUND_STATUSES = frozenset({401, 404})


class CallbackError(Exception):
    """A status callback that must not be believed."""


class CallbackSignatureError(CallbackError):
    """`X-Twilio-Signature` is missing or was not made with our auth token."""


class CallbackPayloadError(CallbackError):
    """A correctly signed callback that lacks the fields a status report needs."""


@dataclass(frozen=True, kw_only=True)
class TwilioSettings:
    """One Twilio account bound as a Relay carrier.

    `status_callback_url` is the public URL of Relay's callback route for this
    carrier, exactly as Twilio will request it: it is part of the signature.
    Set `from_number`, `messaging_service_sid`, or both (a sender of the pool).
    """

    name: str
    account_sid: str
    auth_token: str = field(repr=False)
    status_callback_url: str
    from_number: str | None = None
    messaging_service_sid: str | None = None
    base_url: str = "https://api.twilio.com"
    timeout: float = 10.0
    throttle_retry_after: float = 1.0

    def __post_init__(self) -> None:
        _check(bool(self.name), "name must not be empty")
        _check(_matches(_ACCOUNT_SID, self.account_sid), "account_sid must be AC + 32 hex digits")
        _check(bool(self.auth_token), "auth_token must not be empty")
        _check(_is_http_url(self.status_callback_url), "status_callback_url must be an http(s) URL")
        _check(_is_http_url(self.base_url), "base_url must be an http(s) URL")
        _check(
            bool(self.from_number) or self.messaging_service_sid is not None,
            "set from_number or messaging_service_sid",
        )
        _check(
            self.messaging_service_sid is None
            or _matches(_SERVICE_SID, self.messaging_service_sid),
            "messaging_service_sid must be MG + 32 hex digits",
        )
        _check(math.isfinite(self.timeout) and self.timeout > 0, "timeout must be positive")
        _check(self.throttle_retry_after >= 0, "throttle_retry_after must not be negative")


class TwilioCarrier:
    """Sends SMS through Twilio's Messages API; see `TwilioSettings`."""

    def __init__(
        self,
        settings: TwilioSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock or _utc_now
        self._reports: ReportSink | None = None
        self._path = f"/2010-04-01/Accounts/{settings.account_sid}/Messages.json"
        self._client = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/"),
            auth=httpx.BasicAuth(settings.account_sid, settings.auth_token),
            headers={"Accept": "application/json"},
            timeout=settings.timeout,
            transport=transport,
            follow_redirects=False,
        )

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def status_callback_url(self) -> str:
        return self._settings.status_callback_url

    async def start(self, reports: ReportSink) -> None:
        self._reports = reports

    async def close(self) -> None:
        await self._client.aclose()

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        response = await self._post(sms)
        if response.is_success:
            return self._receipt(response, sms)
        raise self._refusal(response, sms)

    async def handle_callback(
        self, url: str, form: Mapping[str, str], signature: str | None
    ) -> None:
        """Verify one status callback and pass a final status on to the sink.

        `url` is the full URL Twilio requested, query string included. Behind a
        proxy that rewrites scheme or host, pass `status_callback_url` instead.
        """
        report = parse_status_callback(
            url=url,
            form=form,
            signature=signature,
            auth_token=self._settings.auth_token,
            carrier=self.name,
            now=self._clock(),
        )
        if report is None:
            return
        if self._reports is None:
            raise RuntimeError(f"carrier {self.name} received a report before start()")
        await self._reports(report)

    async def _post(self, sms: OutboundSms) -> httpx.Response:
        try:
            async with asyncio.timeout(self._settings.timeout):
                return await self._client.post(self._path, data=self._form(sms))
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise CarrierUnavailable("twilio_unreachable", _describe(exc)) from exc
        except (TimeoutError, httpx.TimeoutException) as exc:
            # Twilio may have accepted (and will bill) this SMS: whoever fails
            # over on this code risks sending the user a second one.
            raise CarrierUnavailable("twilio_timeout", _describe(exc)) from exc
        except httpx.HTTPError as exc:
            raise CarrierUnavailable("twilio_unreachable", _describe(exc)) from exc

    def _form(self, sms: OutboundSms) -> dict[str, str]:
        form = {"To": sms.to, "Body": sms.body, "StatusCallback": self.status_callback_url}
        if self._settings.from_number:
            form["From"] = self._settings.from_number
        if self._settings.messaging_service_sid is not None:
            form["MessagingServiceSid"] = self._settings.messaging_service_sid
        return form

    def _receipt(self, response: httpx.Response, sms: OutboundSms) -> SubmitReceipt:
        message = _json_object(response)
        sid = message.get("sid")
        if not isinstance(sid, str) or not sid:
            raise CarrierUnavailable("twilio_bad_response", "Twilio accepted the SMS without a sid")
        status = message.get("status")
        _log.info(
            "twilio accepted carrier=%s attempt=%s sid=%s status=%s",
            self.name,
            sms.attempt_id,
            sid,
            status,
        )
        if status in _FAILED_STATES:
            # Twilio named the message but already gave up on it: failing over
            # now is faster than waiting for the callback that will say so.
            code = _error_code(message.get("error_code")) or "twilio_failed"
            raise CarrierRejected(code, f"Twilio created {sid} as {status}")
        return SubmitReceipt(carrier_message_id=sid)

    def _refusal(self, response: httpx.Response, sms: OutboundSms) -> CarrierError:
        code, message = _twilio_error(response)
        status = response.status_code
        _log.warning(
            "twilio refused carrier=%s attempt=%s http=%s code=%s",
            self.name,
            sms.attempt_id,
            status,
            code,
        )
        if status == 429:
            retry_after = _retry_after(
                response.headers.get("Retry-After"),
                now=self._clock(),
                default=self._settings.throttle_retry_after,
            )
            return CarrierThrottled(code, message, retry_after=retry_after)
        if 400 <= status < 500 and status not in _NOT_BOUND_STATUSES:
            return CarrierRejected(code, message)
        return CarrierUnavailable(code, message)


def parse_status_callback(
    *,
    url: str,
    form: Mapping[str, str],
    signature: str | None,
    auth_token: str,
    carrier: str,
    now: datetime,
) -> DeliveryReport | None:
    """Turn one Twilio status callback into a report, or None while not final.

    Raises `CallbackSignatureError` before reading anything else.
    """
    if not _signature_valid(auth_token, url, form, signature):
        raise CallbackSignatureError("X-Twilio-Signature does not match this request")
    status = _required(form, "MessageStatus")
    sid = _required(form, "MessageSid")
    if status in _DELIVERED_STATES:
        return DeliveryReport(carrier, sid, "delivered", None, now)
    if status in _FAILED_STATES:
        return DeliveryReport(carrier, sid, "failed", _error_code(form.get("ErrorCode")), now)
    return None


def twilio_signature(auth_token: str, url: str, form: Mapping[str, str]) -> str:
    """Twilio's request signature: base64(HMAC-SHA1(token, url + sorted key+value))."""
    payload = url + "".join(key + form[key] for key in sorted(form))
    digest = hmac.new(auth_token.encode(), payload.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def _signature_valid(
    auth_token: str, url: str, form: Mapping[str, str], signature: str | None
) -> bool:
    if not signature:
        return False
    given = signature.strip().encode()
    # Constant-time comparison of every candidate, so timing says nothing
    # about how much of a forged signature was right.
    matches = [
        hmac.compare_digest(twilio_signature(auth_token, candidate, form).encode(), given)
        for candidate in _url_variants(url)
    ]
    return any(matches)


def _url_variants(url: str) -> tuple[str, ...]:
    """`url`, without its port and with its (default) port.

    Twilio signs some requests with the default port and some without, so its
    own validators accept both spellings.
    """
    parts = urlsplit(url)
    head_length = len(parts.scheme) + 3 + len(parts.netloc)
    if not parts.netloc or url[len(parts.scheme) : len(parts.scheme) + 3] != "://":
        return (url,)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return (url,)
    host = parts.netloc.rsplit(":", 1)[0] if parts.port else parts.netloc
    scheme, rest = url[: len(parts.scheme) + 3], url[head_length:]
    variants = [url, f"{scheme}{host}{rest}"]
    if port is not None:
        variants.append(f"{scheme}{host}:{port}{rest}")
    return tuple(dict.fromkeys(variants))


def _required(form: Mapping[str, str], key: str) -> str:
    value = form.get(key, "").strip()
    if not value:
        raise CallbackPayloadError(f"status callback without {key}")
    return value


def _error_code(raw: object) -> str | None:
    if isinstance(raw, bool) or raw is None:
        return None
    text = str(raw).strip()
    return f"twilio_{text}" if _ERROR_CODE.fullmatch(text) else None


def _twilio_error(response: httpx.Response) -> tuple[str, str]:
    """`code` and `message` of Twilio's error body, or the HTTP status."""
    body = _json_object(response)
    code = _error_code(body.get("code")) if isinstance(body.get("code"), int) else None
    message = body.get("message")
    return (
        code or f"twilio_http_{response.status_code}",
        message if isinstance(message, str) and message else response.reason_phrase,
    )


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(value: str | None, *, now: datetime, default: float) -> float:
    """Seconds to wait from a Retry-After of delay-seconds or HTTP-date form."""
    if not value:
        return default
    seconds: float | None
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until(value, now)
    if seconds is None or not math.isfinite(seconds):
        return default
    return max(0.0, seconds)


def _seconds_until(http_date: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def _describe(exc: Exception) -> str:
    # httpx messages name the URL, never the form, so they carry no code.
    return f"Twilio did not answer: {type(exc).__name__}: {exc}".rstrip(": ")


def _is_http_url(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in _DEFAULT_PORTS and bool(parts.netloc)


def _matches(pattern: re.Pattern[str], value: str) -> bool:
    return pattern.fullmatch(value) is not None


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"TwilioSettings: {message}")


def _utc_now() -> datetime:
    return datetime.now(UTC)
