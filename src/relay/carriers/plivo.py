"""Plivo's Message API as a carrier.

Sends with `POST /v1/Account/{auth_id}/Message/` (JSON, HTTP Basic with the
Auth ID and Auth Token), with `url` pointing at Relay's callback route, and
reads the form-encoded status callbacks Plivo posts back.

Plivo signs callbacks two ways. V2 covers only the URL and a nonce, so a V2
signature taken from one callback would vouch for any body; Relay therefore
checks `X-Plivo-Signature-V3`, which covers the URL, every posted parameter
and the nonce (HMAC-SHA256 under the Auth Token). Neither scheme carries a
timestamp: a callback whose own signed time (`DeliveryReportTime`, else the
latest of the others) is further than `signature_tolerance` from now is
refused as stale.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import httpx

from relay.carriers.base import OutboundSms
from relay.carriers.callbacks import (
    CallbackPayloadError,
    CallbackSignatureError,
    StatusCallback,
    check_fresh,
    same_text,
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
from relay.carriers.json_fields import nonempty_text

__all__ = ["PlivoApi", "PlivoSettings", "plivo_signature_v3"]

_SIGNATURE_HEADER = "x-plivo-signature-v3"
_NONCE_HEADER = "x-plivo-signature-v3-nonce"
# The callback's own times, newest first; Plivo writes `2024-05-10 10:17:37.081458`.
_TIME_FIELDS = ("DeliveryReportTime", "SentTime", "QueuedTime", "MessageTime")
# `sent` may be the last word where operators return no receipt: it stays
# progress, and the carrier's receipt timeout decides.
_STATES = FinalStates(frozenset({"delivered"}), frozenset({"failed", "undelivered", "rejected"}))


@dataclass(frozen=True, kw_only=True)
class PlivoSettings(SignedSettings):
    """One Plivo account (or subaccount) bound as a Relay carrier."""

    auth_id: str
    auth_token: str = field(repr=False)
    sender: str
    signature_tolerance: float = 3600.0
    base_url: str = "https://api.plivo.com"

    def checks(self) -> dict[str, bool]:
        return {
            "auth_id must be letters and digits": self.auth_id.isalnum(),
            "auth_token must not be empty": bool(self.auth_token),
            "sender must not be empty": bool(self.sender),
            **super().checks(),
        }


class PlivoApi:
    """Plivo's Message resource and its V3-signed status callbacks."""

    label = "plivo"
    headers: Mapping[str, str] = {}

    def __init__(self, settings: PlivoSettings) -> None:
        self._settings = settings
        self.auth: httpx.Auth | None = httpx.BasicAuth(settings.auth_id, settings.auth_token)

    def request(self, sms: OutboundSms) -> ProviderRequest:
        body = {
            "src": self._settings.sender,
            "dst": sms.to.removeprefix("+"),
            "text": sms.body,
            "url": self._settings.status_callback_url,
            "method": "POST",
        }
        return ProviderRequest(f"/v1/Account/{self._settings.auth_id}/Message/", json=body)

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            error = answer.body.get("error")
            text = nonempty_text(error) or answer.reason
            return Refused(f"plivo_http_{answer.status}", text)
        uuids = answer.body.get("message_uuid")
        first = nonempty_text(uuids[0] if isinstance(uuids, list) and uuids else None)
        if first is None:
            return Refused(
                "plivo_bad_response", "Plivo queued the SMS without a message_uuid", "unavailable"
            )
        return Accepted(first, None, "queued")

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        given = callback.header(_SIGNATURE_HEADER)
        nonce = callback.header(_NONCE_HEADER)
        if not given or not nonce:
            raise CallbackSignatureError("the callback carries no X-Plivo-Signature-V3")
        form = callback.form()
        expected = plivo_signature_v3(self._settings.auth_token, callback.url, form, nonce)
        # Plivo may list several signatures (one per token it knows), comma-separated.
        matches = [same_text(expected, candidate) for candidate in given.split(",")]
        if not any(matches):
            raise CallbackSignatureError("X-Plivo-Signature-V3 does not match this callback")
        signed_at = _signed_time(form)
        if signed_at is not None:
            check_fresh(str(signed_at), now=now, tolerance=self._settings.signature_tolerance)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        form = callback.form()
        message_id, status = form.get("MessageUUID"), form.get("Status")
        if not message_id or not status:
            raise CallbackPayloadError("status callback without MessageUUID or Status")
        error = form.get("ErrorCode", "")
        return [_STATES.update(message_id, status, f"plivo_{error}" if error.isdigit() else None)]


def plivo_signature_v3(auth_token: str, url: str, params: Mapping[str, str], nonce: str) -> str:
    """Plivo's V3 signature of a POST: base64(HMAC-SHA256(token, signed text + "." + nonce)).

    The signed text is the URL without its query, `?`, the URL's query sorted as
    `k=v&k=v` (then `.` when there is one), and the posted parameters sorted as
    `kv` run together; with nothing posted, the `?` only comes with a query.
    """
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    query = "&".join(f"{k}={v}" for k, v in sorted(parse_qsl(parts.query, keep_blank_values=True)))
    if params:
        signed = f"{base}?{query}{'.' if query else ''}"
        signed += "".join(f"{key}{params[key]}" for key in sorted(params))
    else:
        signed = f"{base}?{query}" if query else base
    digest = hmac.new(auth_token.encode(), f"{signed}.{nonce}".encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


def _signed_time(form: Mapping[str, str]) -> float | None:
    for name in _TIME_FIELDS:
        value = form.get(name, "").strip()
        if not value:
            continue
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            continue
        # Unconfirmed whether Plivo writes an offset; without one, read as UTC.
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    return None
