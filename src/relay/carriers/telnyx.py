"""Telnyx Messaging (API v2) as a carrier.

Sends with `POST /v2/messages` (JSON, `Authorization: Bearer <API key>`), with
`webhook_url` pointing at Relay's callback route, and reads the `message.sent`
and `message.finalized` webhooks Telnyx posts back. Telnyx signs each webhook
with its Ed25519 key over `"{telnyx-timestamp}|{raw body}"`; Relay checks it
with the account's public key and refuses one signed more than
`signature_tolerance` seconds away (Telnyx's own SDK allows 300).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from relay.carriers.base import OutboundSms
from relay.carriers.callbacks import (
    CallbackPayloadError,
    CallbackSignatureError,
    StatusCallback,
    check_fresh,
)
from relay.carriers.http_carrier import (
    Accepted,
    Answer,
    FinalStates,
    ProviderRequest,
    Refused,
    SignedSettings,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text, whole_number
from relay.carriers.retry_after import seconds_header

__all__ = ["TelnyxApi", "TelnyxSettings"]

_MESSAGES_PATH = "/v2/messages"
_SIGNATURE_HEADER = "telnyx-signature-ed25519"
_TIMESTAMP_HEADER = "telnyx-timestamp"
_EVENTS = frozenset({"message.sent", "message.finalized"})

# `to[].status` of the message object; `delivery_unconfirmed` says nothing
# either way, so the receipt timeout decides (as for a carrier that stays silent).
_STATES = FinalStates(
    frozenset({"delivered"}),
    frozenset({"sending_failed", "delivery_failed", "expired", "cancelled"}),
)


@dataclass(frozen=True, kw_only=True)
class TelnyxSettings(SignedSettings):
    """One Telnyx account bound as a Relay carrier.

    `public_key` is the account's Ed25519 public key (base64, Mission Control →
    Keys & Credentials), which verifies webhooks; `sender` is the `from`
    number or alphanumeric sender (the latter needs `messaging_profile_id`).
    """

    api_key: str = field(repr=False)
    public_key: str
    sender: str
    messaging_profile_id: str | None = None
    base_url: str = "https://api.telnyx.com"

    def checks(self) -> dict[str, bool]:
        return {
            "api_key must not be empty": bool(self.api_key),
            "public_key must be a base64 Ed25519 public key (32 bytes)": _public_key(
                self.public_key
            )
            is not None,
            "sender must not be empty": bool(self.sender),
            **super().checks(),
        }


class TelnyxApi:
    """Telnyx's Messages resource and its signed webhooks."""

    label = "telnyx"
    auth: httpx.Auth | None = None

    def __init__(self, settings: TelnyxSettings) -> None:
        self._settings = settings
        self.headers: Mapping[str, str] = {"Authorization": f"Bearer {settings.api_key}"}
        key = _public_key(settings.public_key)
        if key is None:
            raise ValueError("TelnyxSettings: public_key must be a base64 Ed25519 public key")
        self._key = key

    def request(self, sms: OutboundSms) -> ProviderRequest:
        settings = self._settings
        body: dict[str, Any] = {
            "from": settings.sender,
            "to": sms.to,
            "text": sms.body,
            "webhook_url": settings.status_callback_url,
        }
        if settings.messaging_profile_id:
            body["messaging_profile_id"] = settings.messaging_profile_id
        return ProviderRequest(_MESSAGES_PATH, json=body)

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            return _refusal(answer)
        data = answer.body.get("data")
        message_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(message_id, str) or not message_id:
            return Refused(
                "telnyx_bad_response", "Telnyx accepted the SMS without an id", "unavailable"
            )
        status = _recipient_status(data)
        if status in _STATES.failed:
            code = _error_code(data) or "telnyx_failed"
            return Refused(code, f"Telnyx created {message_id} as {status}", "rejected")
        return Accepted(message_id, whole_number(data.get("parts")), status)

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        timestamp = callback.header(_TIMESTAMP_HEADER)
        try:
            signature = base64.b64decode(callback.header(_SIGNATURE_HEADER) or "", validate=True)
            self._key.verify(signature, f"{timestamp}|".encode() + callback.body)
        except (ValueError, InvalidSignature) as exc:
            # ValueError: not base64, or not ASCII at all (binascii.Error is one).
            raise CallbackSignatureError("telnyx-signature-ed25519 does not match") from exc
        # Checked after the signature, which covers the timestamp.
        check_fresh(timestamp, now=now, tolerance=self._settings.signature_tolerance)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        data = callback.json().get("data")
        if not isinstance(data, dict):
            raise CallbackPayloadError("webhook without data")
        if data.get("event_type") not in _EVENTS:
            return []
        payload = data.get("payload")
        message_id = payload.get("id") if isinstance(payload, dict) else None
        if not isinstance(payload, dict) or not isinstance(message_id, str) or not message_id:
            raise CallbackPayloadError("webhook without data.payload.id")
        return [_STATES.update(message_id, _recipient_status(payload), _error_code(payload))]


def _refusal(answer: Answer) -> Refused:
    code = _error_code(answer.body) or f"telnyx_http_{answer.status}"
    message = _error_text(answer.body) or answer.reason
    if answer.status == 429:
        # Telnyx documents its x-ratelimit-reset (seconds), not a Retry-After.
        wait = (
            None
            if "retry-after" in answer.headers
            else seconds_header(answer.headers, "x-ratelimit-reset")
        )
        return Refused(code, message, "throttled", retry_after=wait)
    return Refused(code, message)


def _recipient_status(message: Mapping[str, Any]) -> str | None:
    recipients = message.get("to")
    first = recipients[0] if isinstance(recipients, list) and recipients else None
    status = first.get("status") if isinstance(first, dict) else None
    return status if isinstance(status, str) else None


def _first_error(body: Mapping[str, Any]) -> Mapping[str, Any]:
    errors = body.get("errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    return first if isinstance(first, dict) else {}


def _error_code(body: Mapping[str, Any]) -> str | None:
    code = _first_error(body).get("code")
    text = str(code) if isinstance(code, str | int) and not isinstance(code, bool) else ""
    return f"telnyx_{text}" if text.isalnum() and len(text) <= 16 else None


def _error_text(body: Mapping[str, Any]) -> str | None:
    error = _first_error(body)
    text = error.get("detail") or error.get("title")
    return nonempty_text(text)


def _public_key(encoded: str) -> Ed25519PublicKey | None:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError):
        return None
