"""Sinch's SMS REST API (XMS) as a carrier.

Sends each SMS as a batch of one, `POST /xms/v1/{service_plan_id}/batches`
(JSON, `Authorization: Bearer <API token>`), asking for
`delivery_report = "per_recipient_final"` with `callback_url` pointing at
Relay's callback route, so the one report that comes back is final.

Sinch signs nothing unless HMAC signing was set up for the service plan: then
each callback carries `x-sinch-webhook-signature`, base64 HMAC-SHA256 of
`"{raw body}.{nonce}.{timestamp}"` under the callback secret, and Relay also
refuses one signed more than `signature_tolerance` away. Without it, the
callback URL carries `callback_secret`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import httpx

from relay.carriers.base import OutboundSms
from relay.carriers.callbacks import (
    CallbackPayloadError,
    CallbackSignatureError,
    StatusCallback,
    check_fresh,
    check_url_secret,
    same_text,
)
from relay.carriers.http_carrier import (
    Accepted,
    Answer,
    FinalStates,
    OptionallySignedSettings,
    ProviderRequest,
    Refused,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text, whole_number

__all__ = ["SinchApi", "SinchSettings", "sinch_signature"]

_REPORT_TYPE = "recipient_delivery_report_sms"
# `Unknown` says nothing either way: the receipt timeout decides.
_STATES = FinalStates(
    frozenset({"Delivered"}),
    frozenset({"Aborted", "Cancelled", "Rejected", "Deleted", "Failed", "Expired"}),
)


@dataclass(frozen=True, kw_only=True)
class SinchSettings(OptionallySignedSettings):
    """One Sinch service plan bound as a Relay carrier.

    `base_url` names the region (`https://eu.sms.api.sinch.com` for Europe).
    Set `signature_secret` when the plan signs callbacks (HMAC), otherwise
    `callback_secret`.
    """

    service_plan_id: str
    api_token: str = field(repr=False)
    sender: str
    base_url: str = "https://us.sms.api.sinch.com"

    def checks(self) -> dict[str, bool]:
        return {
            "service_plan_id must be letters and digits": self.service_plan_id.isalnum(),
            "api_token must not be empty": bool(self.api_token),
            "sender must not be empty": bool(self.sender),
            "set signature_secret (HMAC-signed callbacks) or callback_secret": bool(
                self.signature_secret or self.callback_secret
            ),
            **super().checks(),
        }


class SinchApi:
    """Sinch's batches resource and its delivery report callbacks."""

    label = "sinch"
    auth: httpx.Auth | None = None

    def __init__(self, settings: SinchSettings) -> None:
        self._settings = settings
        self.headers: Mapping[str, str] = {"Authorization": f"Bearer {settings.api_token}"}
        self._callback_url = settings.provider_callback_url

    def request(self, sms: OutboundSms) -> ProviderRequest:
        body = {
            "from": self._settings.sender,
            "to": [sms.to],
            "body": sms.body,
            "delivery_report": "per_recipient_final",
            "callback_url": self._callback_url,
        }
        return ProviderRequest(f"/xms/v1/{self._settings.service_plan_id}/batches", json=body)

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            code, text = answer.body.get("code"), answer.body.get("text")
            known = isinstance(code, str) and code.replace("_", "").isalnum()
            refused = Refused(
                f"sinch_{code}" if known else f"sinch_http_{answer.status}",
                nonempty_text(text) or answer.reason,
            )
            # Sinch's 403 says the plan may not do this at all, not that this SMS is wrong.
            return replace(refused, outcome="unavailable") if answer.status == 403 else refused
        batch_id = nonempty_text(answer.body.get("id"))
        if batch_id is None:
            return Refused(
                "sinch_bad_response", "Sinch created a batch without an id", "unavailable"
            )
        return Accepted(batch_id, None, "created")

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        secret = self._settings.signature_secret
        if not secret:
            check_url_secret(callback, self._settings.callback_secret or "")
            return
        nonce = callback.header("x-sinch-webhook-signature-nonce") or ""
        timestamp = callback.header("x-sinch-webhook-signature-timestamp") or ""
        expected = sinch_signature(secret, callback.body, nonce, timestamp)
        if not nonce or not same_text(expected, callback.header("x-sinch-webhook-signature")):
            raise CallbackSignatureError("x-sinch-webhook-signature does not match")
        check_fresh(timestamp, now=now, tolerance=self._settings.signature_tolerance)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        report = callback.json()
        if report.get("type") != _REPORT_TYPE:
            return []
        batch_id, status = report.get("batch_id"), report.get("status")
        if not isinstance(batch_id, str) or not batch_id or not isinstance(status, str):
            raise CallbackPayloadError("delivery report without batch_id or status")
        code = whole_number(report.get("code"))
        error = None if code is None else f"sinch_{code}"
        return [_STATES.update(batch_id, status, error)]


def sinch_signature(secret: str, body: bytes, nonce: str, timestamp: str) -> str:
    """base64(HMAC-SHA256(secret, raw body + "." + nonce + "." + timestamp))."""
    signed = body + f".{nonce}.{timestamp}".encode()
    return base64.b64encode(hmac.new(secret.encode(), signed, hashlib.sha256).digest()).decode()
