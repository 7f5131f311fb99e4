"""Vonage SMS API (rest.nexmo.com) as a carrier.

Sends with `POST /sms/json` (form-encoded, `api_key` and `api_secret` as
fields), with `callback` pointing at Relay's callback route, and reads the
delivery receipts Vonage posts back. Vonage answers HTTP 200 even when it
refuses: each part's `status` says how (`1` throttled, `4` bad credentials,
`6` invalid message, ...).

Vonage signs receipts only once its support has turned signing on for the
account: then each carries `sig`, `timestamp` and `nonce`, and Relay checks
`sig` with the signature secret and the method chosen in the dashboard. An
account without signing sets `callback_secret` instead, and the callback URL
carries it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

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
    Outcome,
    ProviderRequest,
    Refused,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text
from relay.sms.encoding import is_gsm7

__all__ = ["VonageApi", "VonageSettings", "vonage_signature"]

SignatureMethod = Literal["md5hash", "md5", "sha1", "sha256", "sha512"]

_SEND_PATH = "/sms/json"
_THROTTLED = "1"
# Part statuses that say the account or the platform is wrong, not this SMS
# (credentials, barred account, no credit, HTTP not enabled, signing, internal).
_NOT_BOUND = frozenset({"4", "5", "8", "9", "10", "11", "14", "32"})
# Receipt statuses; `unknown` says nothing either way, so the receipt timeout decides.
_STATES = FinalStates(frozenset({"delivered"}), frozenset({"expired", "failed", "rejected"}))


@dataclass(frozen=True, kw_only=True)
class VonageSettings(OptionallySignedSettings):
    """One Vonage account bound as a Relay carrier.

    Set `signature_secret` (and `signature_method`, as the dashboard says) when
    Vonage signs the account's receipts; otherwise `callback_secret`, a random
    string only Relay and Vonage's callback URL know.
    """

    api_key: str
    api_secret: str = field(repr=False)
    sender: str
    signature_method: SignatureMethod = "md5hash"
    base_url: str = "https://rest.nexmo.com"

    def checks(self) -> dict[str, bool]:
        return {
            "api_key must not be empty": bool(self.api_key),
            "api_secret must not be empty": bool(self.api_secret),
            "sender must not be empty": bool(self.sender),
            "set signature_secret (signed receipts) or callback_secret": bool(
                self.signature_secret or self.callback_secret
            ),
            "signature_method must be md5hash, md5, sha1, sha256 or sha512": (
                self.signature_method in get_args(SignatureMethod)
            ),
            **super().checks(),
        }


class VonageApi:
    """Vonage's SMS API and its (optionally signed) delivery receipts."""

    label = "vonage"
    headers: Mapping[str, str] = {}
    auth: httpx.Auth | None = None

    def __init__(self, settings: VonageSettings) -> None:
        self._settings = settings
        self._callback_url = settings.provider_callback_url

    def request(self, sms: OutboundSms) -> ProviderRequest:
        form = {
            "api_key": self._settings.api_key,
            "api_secret": self._settings.api_secret,
            "from": self._settings.sender,
            "to": sms.to.removeprefix("+"),
            "text": sms.body,
            # Without `unicode`, Vonage sends GSM and mangles anything outside it.
            "type": "text" if is_gsm7(sms.body) else "unicode",
            "callback": self._callback_url,
        }
        return ProviderRequest(_SEND_PATH, form=form)

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        messages = answer.body.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        if not answer.ok or not isinstance(first, dict):
            if answer.ok:
                return Refused(
                    "vonage_bad_response", "Vonage answered without messages", "unavailable"
                )
            return Refused(f"vonage_http_{answer.status}", answer.reason)
        status = str(first.get("status", ""))
        if status != "0":
            text = first.get("error-text")
            message = nonempty_text(text) or f"Vonage status {status}"
            return Refused(
                f"vonage_{status}" if status.isdigit() else "vonage_refused",
                message,
                _outcome(status),
            )
        message_id = nonempty_text(first.get("message-id"))
        if message_id is None:
            return Refused(
                "vonage_bad_response", "Vonage accepted the SMS without a message-id", "unavailable"
            )
        # One entry per part: the count is what Vonage bills. A long text's
        # later parts have ids of their own; the first part's receipt decides.
        count = str(answer.body.get("message-count", ""))
        return Accepted(message_id, int(count) if count.isdigit() else len(messages or []), "0")

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        settings = self._settings
        if not settings.signature_secret:
            check_url_secret(callback, settings.callback_secret or "")
            return
        params = _params(callback)
        expected = vonage_signature(params, settings.signature_secret, settings.signature_method)
        given = params.get("sig")
        if not same_text(expected, given.lower() if given else None):
            raise CallbackSignatureError("sig does not match this receipt")
        check_fresh(params.get("timestamp"), now=now, tolerance=settings.signature_tolerance)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        params = _params(callback)
        message_id, status = params.get("messageId"), params.get("status")
        if not message_id or not status:
            raise CallbackPayloadError("delivery receipt without messageId or status")
        error = params.get("err-code", "")
        code = f"vonage_dlr_{error}" if error.isdigit() else None
        return [_STATES.update(message_id, status, code)]


def vonage_signature(params: Mapping[str, str], secret: str, method: SignatureMethod) -> str:
    """Vonage's `sig`: every parameter but `sig`, sorted, as `&key=value` (with `&` and
    `=` in values turned to `_`), then MD5 with the secret appended, or an HMAC; lower hex."""
    text = "".join(
        f"&{key}={params[key].replace('&', '_').replace('=', '_')}"
        for key in sorted(params)
        if key != "sig"
    )
    if method == "md5hash":
        # MD5 is weak, but it is the scheme Vonage signs with unless the account picks an HMAC.
        return hashlib.md5((text + secret).encode()).hexdigest()  # noqa: S324
    return hmac.new(secret.encode(), text.encode(), method).hexdigest()


def _outcome(status: str) -> Outcome:
    if status == _THROTTLED:
        return "throttled"
    return "unavailable" if status in _NOT_BOUND else "rejected"


def _params(callback: StatusCallback) -> dict[str, str]:
    """A receipt's parameters, posted as JSON or as a form (the dashboard decides)."""
    if not callback.is_json():
        return callback.form()
    document: dict[str, Any] = callback.json()
    return {key: value for key, value in document.items() if isinstance(value, str)}
