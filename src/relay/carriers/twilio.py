"""Twilio Programmable Messaging as a carrier.

Speaks `POST /2010-04-01/Accounts/{AccountSid}/Messages.json` as published in
Twilio's OpenAPI description (vendored in `tests/carriers/vendor/twilio/`) and
turns the signed status callbacks Twilio posts back into `DeliveryReport`s.
What every HTTP provider shares lives in `relay.carriers.http_carrier`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

import httpx

from relay.carriers.base import DeliveryReport, OutboundSms
from relay.carriers.callbacks import (
    CallbackError,
    CallbackPayloadError,
    CallbackSignatureError,
    StatusCallback,
)
from relay.carriers.http_carrier import (
    Accepted,
    Answer,
    FinalStates,
    HttpSettings,
    ProviderRequest,
    Refused,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text

__all__ = [
    "CallbackError",
    "CallbackPayloadError",
    "CallbackSignatureError",
    "TwilioSettings",
    "parse_status_callback",
    "twilio_signature",
]

_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_SERVICE_SID = re.compile(r"MG[0-9a-fA-F]{32}")
_ERROR_CODE = re.compile(r"[0-9A-Za-z]{1,16}")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SIGNATURE_HEADER = "x-twilio-signature"

# Final states of `message_enum_status`; every other state is still moving.
_STATES = FinalStates(
    frozenset({"delivered", "read"}), frozenset({"failed", "undelivered", "canceled"})
)


@dataclass(frozen=True, kw_only=True)
class TwilioSettings(HttpSettings):
    """One Twilio account bound as a Relay carrier.

    Set `from_number`, `messaging_service_sid`, or both (a sender of the pool).
    """

    account_sid: str
    auth_token: str = field(repr=False)
    from_number: str | None = None
    messaging_service_sid: str | None = None
    base_url: str = "https://api.twilio.com"

    def checks(self) -> dict[str, bool]:
        return {
            "account_sid must be AC + 32 hex digits": _ACCOUNT_SID.fullmatch(self.account_sid)
            is not None,
            "auth_token must not be empty": bool(self.auth_token),
            "set from_number or messaging_service_sid": bool(self.from_number)
            or self.messaging_service_sid is not None,
            "messaging_service_sid must be MG + 32 hex digits": self.messaging_service_sid is None
            or _SERVICE_SID.fullmatch(self.messaging_service_sid) is not None,
        }


class TwilioApi:
    """Twilio's Messages resource: form-encoded sends, Basic auth, signed form callbacks."""

    label = "twilio"
    headers: Mapping[str, str] = {}

    def __init__(self, settings: TwilioSettings) -> None:
        self._settings = settings
        self.auth: httpx.Auth | None = httpx.BasicAuth(settings.account_sid, settings.auth_token)

    def request(self, sms: OutboundSms) -> ProviderRequest:
        settings = self._settings
        form = {"To": sms.to, "Body": sms.body, "StatusCallback": settings.status_callback_url}
        if settings.from_number:
            form["From"] = settings.from_number
        if settings.messaging_service_sid is not None:
            form["MessagingServiceSid"] = settings.messaging_service_sid
        return ProviderRequest(
            f"/2010-04-01/Accounts/{settings.account_sid}/Messages.json", form=form
        )

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            return _twilio_error(answer)
        sid, status = nonempty_text(answer.body.get("sid")), answer.body.get("status")
        if sid is None:
            return Refused(
                "twilio_bad_response", "Twilio accepted the SMS without a sid", "unavailable"
            )
        if status in _STATES.failed:
            # Twilio named the message but already gave up on it: failing over
            # now is faster than waiting for the callback that will say so.
            code = _error_code(answer.body.get("error_code")) or "twilio_failed"
            return Refused(code, f"Twilio created {sid} as {status}", "rejected")
        return Accepted(sid, _segments(answer.body.get("num_segments")), str(status))

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        signature = callback.header(_SIGNATURE_HEADER)
        if not _signature_valid(
            self._settings.auth_token, callback.url, callback.form(), signature
        ):
            raise CallbackSignatureError("X-Twilio-Signature does not match this request")

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        return [_status_update(callback.form())]


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
    update = _status_update(form)
    if update.status is None:
        return None
    return DeliveryReport(carrier, update.message_id, update.status, update.error_code, now)


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


def _status_update(form: Mapping[str, str]) -> StatusUpdate:
    status = _required(form, "MessageStatus")
    sid = _required(form, "MessageSid")
    return _STATES.update(sid, status, _error_code(form.get("ErrorCode")))


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


def _twilio_error(answer: Answer) -> Refused:
    """`code` and `message` of Twilio's error body, or the HTTP status."""
    raw_code, message = answer.body.get("code"), answer.body.get("message")
    code = _error_code(raw_code) if isinstance(raw_code, int) else None
    return Refused(
        code or f"twilio_http_{answer.status}",
        nonempty_text(message) or answer.reason,
    )


def _segments(raw: object) -> int | None:
    text = str(raw) if isinstance(raw, str | int) and not isinstance(raw, bool) else ""
    return int(text) if text.isdigit() and int(text) > 0 else None
