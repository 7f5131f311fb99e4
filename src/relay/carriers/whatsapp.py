"""WhatsApp through Meta's WhatsApp Business Cloud API, as a carrier of the `whatsapp` channel.

Sends the code in an authentication template with a copy-code button,
`POST {base_url}/{api_version}/{phone_number_id}/messages` with
`Authorization: Bearer <access token>`, as Meta documents it:

- https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates/auth-otp-template-messages
  (the body and button parameters both carry the code; at most 15 characters;
  the answer's `messages[0].id` names the message);
- https://developers.facebook.com/docs/whatsapp/business-management-api/authentication-templates/copy-code-button-authentication-templates
  (a copy-code button is created as `otp` and sent as a `url` button, index 0);
- https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes
  (Graph API errors, `{"error": {"code", "message", "error_data": {"details"}}}`:
  build on `code`, not on the HTTP status, which is 400 for most of them,
  rate limits included).

Meta bills each delivered authentication template message once, whatever its
length (per-message pricing, developers.facebook.com/docs/whatsapp/pricing):
an accepted send counts as one billed unit. The delivery webhooks and the
subscription handshake are read by `relay.carriers.whatsapp_webhooks`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import httpx

from relay.carriers.base import CarrierRejected, OutboundSms
from relay.carriers.callbacks import StatusCallback
from relay.carriers.http_carrier import (
    Accepted,
    Answer,
    HttpCarrier,
    HttpSettings,
    Outcome,
    ProviderRequest,
    Refused,
    StatusUpdate,
)
from relay.carriers.json_fields import nonempty_text, whole_number
from relay.carriers.whatsapp_languages import META_LANGUAGE, template_language_for
from relay.carriers.whatsapp_webhooks import check_signature, handshake_challenge, read_statuses

__all__ = ["WhatsAppApi", "WhatsAppCarrier", "WhatsAppSettings", "whatsapp_outcome"]

_API_VERSION = re.compile(r"v\d{1,3}\.\d{1,3}")
# Meta's template names: lower-case letters, digits and underscores, at most 512.
_TEMPLATE_NAME = re.compile(r"[a-z0-9_]{1,512}")
# Meta documents at most 15 characters for the code of an authentication template.
_MAX_CODE = 15

# Graph API error codes read as something other than a refusal of this message
# (https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes).
_THROTTLED = frozenset(
    {
        4,  # the app's API call rate limit
        80007,  # the WhatsApp Business Account's rate limit
        130429,  # Cloud API throughput reached
        131048,  # spam rate limit: this number's sends are restricted for a while
        131056,  # too many messages to this recipient from this number
    }
)
_UNAVAILABLE = frozenset(
    {
        0,  # AuthException: the access token cannot be used
        1,  # API unknown (invalid request or a server error)
        2,  # API service: temporary downtime or overload
        3,  # API method: a capability or permission of the app
        10,  # permission denied
        33,  # the business phone number was deleted
        190,  # the access token has expired
        368,  # the account is blocked for policy violations
        131000,  # something went wrong (Meta's side)
        131005,  # access denied
        131016,  # service unavailable
        131031,  # the business account is locked
        131042,  # a payment problem of the business account
        131057,  # the business account is in maintenance mode
        132000,  # the template's parameters do not match its definition
        132001,  # the template does not exist in this language
        132015,  # the template is paused for low quality
        132016,  # the template is disabled
        133010,  # the phone number is not registered on the Cloud API
    }
)
# 200-299 are all "API permission" errors of the app.
_PERMISSIONS = range(200, 300)


@dataclass(frozen=True, kw_only=True)
class WhatsAppSettings(HttpSettings):
    """One WhatsApp Business phone number, bound as a carrier of the `whatsapp` channel.

    `access_token` is a system user's token with `whatsapp_business_messaging`;
    `app_secret` is the Meta app's secret, which signs webhooks; `verify_token`
    is the string typed in the App Dashboard for the subscription handshake;
    `template` is an approved authentication template with a copy-code button,
    in `template_language`, or in each of `template_languages` (Meta's codes),
    which then names the one for each verification's locale and must hold
    `template_language`, the default. `status_callback_url` is the Callback URL to type in
    the App Dashboard: Meta posts every webhook of the app there.
    """

    phone_number_id: str
    access_token: str = field(repr=False)
    app_secret: str = field(repr=False)
    verify_token: str = field(repr=False)
    template: str
    template_language: str
    template_languages: tuple[str, ...] = ()
    base_url: str = "https://graph.facebook.com"
    api_version: str = "v21.0"

    def __post_init__(self) -> None:
        # A TOML array arrives as a list; anything else is left for checks() to name.
        if isinstance(self.template_languages, list):
            object.__setattr__(self, "template_languages", tuple(self.template_languages))
        super().__post_init__()

    def checks(self) -> dict[str, bool]:
        languages: object = self.template_languages
        listed = isinstance(languages, tuple) and all(
            isinstance(code, str) and META_LANGUAGE.fullmatch(code) for code in languages
        )
        return {
            "phone_number_id must be the number's id (digits)": self.phone_number_id.isdigit()
            and self.phone_number_id.isascii(),
            "access_token must not be empty": bool(self.access_token),
            "app_secret must not be empty": bool(self.app_secret),
            "verify_token must not be empty": bool(self.verify_token),
            "template must be a template name (a-z, 0-9, _)": bool(
                _TEMPLATE_NAME.fullmatch(self.template)
            ),
            "template_language must be a language code such as en_US": bool(
                META_LANGUAGE.fullmatch(self.template_language)
            ),
            'template_languages must be a list of language codes such as ["en_US", "fr"]': listed,
            "template_languages must not repeat a code": not listed
            or len(set(self.template_languages)) == len(self.template_languages),
            "template_language (the default) must be one of template_languages": not listed
            or not self.template_languages
            or self.template_language in self.template_languages,
            "api_version must be a Graph API version such as v21.0": bool(
                _API_VERSION.fullmatch(self.api_version)
            ),
        }


class WhatsAppApi:
    """The Cloud API's messages endpoint and its signed webhooks."""

    label = "whatsapp"
    auth: httpx.Auth | None = None

    def __init__(self, settings: WhatsAppSettings) -> None:
        self._settings = settings
        self.headers: Mapping[str, str] = {"Authorization": f"Bearer {settings.access_token}"}
        self._path = f"/{settings.api_version}/{settings.phone_number_id}/messages"

    def request(self, sms: OutboundSms) -> ProviderRequest:
        code = sms.passcode.code if sms.passcode is not None else ""
        if not code or len(code) > _MAX_CODE:
            # A template carries a code, never free text: nothing else can go this way.
            raise CarrierRejected(
                "whatsapp_no_passcode", "WhatsApp sends only codes of at most 15 characters"
            )
        language = template_language_for(
            sms.passcode.locale if sms.passcode is not None else "",
            approved=self._settings.template_languages,
            default=self._settings.template_language,
        )
        return ProviderRequest(self._path, json=self._template_message(sms.to, code, language))

    def read_answer(self, answer: Answer) -> Accepted | Refused:
        if not answer.ok:
            return _refusal(answer)
        messages = answer.body.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        message_id = nonempty_text(first.get("id")) if isinstance(first, dict) else None
        if first is None or message_id is None:
            return Refused(
                "whatsapp_bad_response", "Meta accepted the message without an id", "unavailable"
            )
        # One delivered template message is one billed unit, whatever its length.
        return Accepted(message_id, 1, nonempty_text(first.get("message_status")))

    def verify(self, callback: StatusCallback, *, now: datetime) -> None:
        # No freshness window: Meta signs no time, and retries a webhook for up to
        # 7 days; a replay can only repeat a status, and the first one counts.
        check_signature(callback, self._settings.app_secret)

    def read_callback(self, callback: StatusCallback) -> list[StatusUpdate]:
        return read_statuses(callback, phone_number_id=self._settings.phone_number_id)

    def _template_message(self, to: str, code: str, language: str) -> dict[str, Any]:
        settings = self._settings
        parameters = [{"type": "text", "text": code}]
        return {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to.lstrip("+"),
            "type": "template",
            "template": {
                "name": settings.template,
                "language": {"code": language},
                "components": [
                    {"type": "body", "parameters": parameters},
                    {"type": "button", "sub_type": "url", "index": "0", "parameters": parameters},
                ],
            },
        }


class WhatsAppCarrier(HttpCarrier):
    """The shared HTTP carrier speaking the Cloud API, on the `whatsapp` channel."""

    # Meta's webhook pages ask for 200 OK, and nothing else, for every notification.
    callback_answer = 200

    def __init__(
        self,
        settings: WhatsAppSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(WhatsAppApi(settings), settings, transport=transport, clock=clock)
        self._verify_token = settings.verify_token

    @property
    def channel(self) -> Literal["whatsapp"]:
        return "whatsapp"

    def answer_handshake(self, query: Mapping[str, str]) -> str:
        """The `hub.challenge` to echo when Meta's subscription check names our token."""
        return handshake_challenge(query, self._verify_token)


def whatsapp_outcome(code: int | None, status: int) -> Outcome | None:
    """What a Graph API error code means for Relay; None lets the HTTP status decide."""
    if code in _THROTTLED or status == 429:
        return "throttled"
    if code in _UNAVAILABLE or (code is not None and code in _PERMISSIONS) or status == 403:
        return "unavailable"
    return None


def _refusal(answer: Answer) -> Refused:
    error = answer.body.get("error")
    error = error if isinstance(error, dict) else {}
    code = whole_number(error.get("code"))
    label = f"whatsapp_{code}" if code is not None else f"whatsapp_http_{answer.status}"
    # `message` is the code's title ("(#131026) Message undeliverable"); `details`
    # may quote the request's parameters, the code among them, so it is not kept.
    message = nonempty_text(error.get("message")) or answer.reason
    return Refused(label, message, whatsapp_outcome(code, answer.status))
