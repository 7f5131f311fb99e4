"""Infobip's SMS API (v3) as a carrier.

Sends with `POST /sms/3/messages` (JSON, `Authorization: App <API key>`), one
message to one destination, with `webhooks.delivery.url` pointing at Relay's
callback route, and reads the delivery reports Infobip posts back (several
per request). Infobip documents no signature on delivery reports, so the
callback URL Relay gives it carries `callback_secret`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from relay.carriers.base import OutboundSms
from relay.carriers.callbacks import (
    CallbackPayloadError,
    StatusCallback,
    check_url_secret,
    url_with_secret,
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

__all__ = ["InfobipApi", "InfobipSettings"]

_SEND_PATH = "/sms/3/messages"
# Group names, except that of the DELIVERED group only DELIVERED_TO_HANDSET is
# final: DELIVERED_TO_OPERATOR is on the way, and the receipt timeout decides.
_STATES = FinalStates(
    frozenset({"DELIVERED_TO_HANDSET"}), frozenset({"UNDELIVERABLE", "EXPIRED", "REJECTED"})
)


@dataclass(frozen=True, kw_only=True)
class InfobipSettings(HttpSettings):
    """One Infobip account bound as a Relay carrier.

    `base_url` is the account's own API host (`https://xxxxx.api.infobip.com`,
    shown in Infobip's portal).
    """

    api_key: str = field(repr=False)
    sender: str
    callback_secret: str = field(repr=False)
    base_url: str = "https://api.infobip.com"

    def checks(self) -> dict[str, bool]:
        return {
            "api_key must not be empty": bool(self.api_key),
            "sender must not be empty": bool(self.sender),
            "callback_secret must not be empty (Infobip signs no report)": bool(
                self.callback_secret
            ),
        }


class InfobipApi:
    """Infobip's SMS messages resource and its delivery reports."""

    label = "infobip"
    auth: httpx.Auth | None = None

    def __init__(self, settings: InfobipSettings) -> None:
        self._settings = settings
        self.headers: Mapping[str, str] = {"Authorization": f"App {settings.api_key}"}
        self._callback_url = url_with_secret(settings.status_callback_url, settings.callback_secret)

    def request(self, sms: OutboundSms) -> ProviderRequest:
        message = {
            "sender": self._settings.sender,
            "destinations": [{"to": sms.to.removeprefix("+")}],
            "content": {"text": sms.body},
            "webhooks": {"delivery": {"url": self._callback_url}},
        }
        return ProviderRequest(_SEND_PATH, json={"messages": [message]})

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            code = _error_code(answer.body)
            return Refused(code or f"infobip_http_{answer.status}", answer.reason)
        messages = answer.body.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        message_id = first.get("messageId") if isinstance(first, dict) else None
        if not isinstance(first, dict) or not isinstance(message_id, str) or not message_id:
            return Refused(
                "infobip_bad_response", "Infobip answered without a messageId", "unavailable"
            )
        status = _object(first, "status")
        if status.get("groupName") == "REJECTED":
            # Infobip takes the request but refuses this message (a bad destination, ...).
            return Refused(
                f"infobip_{status.get('name', 'REJECTED')}",
                str(status.get("description", "")),
                "rejected",
            )
        return Accepted(message_id, None, str(status.get("name", "")))

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        check_url_secret(callback, self._settings.callback_secret)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        results = callback.json().get("results")
        if not isinstance(results, list):
            raise CallbackPayloadError("delivery report without results")
        return [_update(result) for result in results if isinstance(result, dict)]


def _update(result: Mapping[str, Any]) -> StatusUpdate:
    message_id = nonempty_text(result.get("messageId"))
    if message_id is None:
        raise CallbackPayloadError("delivery report without messageId")
    status = _object(result, "status")
    group = status.get("groupName")
    word = status.get("name") if group == "DELIVERED" else group
    error = _object(result, "error").get("name")
    code = (
        f"infobip_{error}" if isinstance(error, str) and error.replace("_", "").isalnum() else None
    )
    return _STATES.update(message_id, word if isinstance(word, str) else None, code)


def _error_code(body: Mapping[str, Any]) -> str | None:
    """`errorCode` of a v3 problem body, or the v2 `serviceException.messageId`."""
    code = body.get("errorCode")
    if code is None:
        code = _object(_object(body, "requestError"), "serviceException").get("messageId")
    text = str(code) if isinstance(code, str | int) and not isinstance(code, bool) else ""
    return f"infobip_{text}" if text and text.replace("_", "").isalnum() else None


def _object(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}
