"""A local Telnyx that speaks the Messaging API v2 as Telnyx documents it.

Built from Telnyx's published reference:

- send: https://developers.telnyx.com/docs/messaging/messages/send-message
  (`POST /v2/messages`, JSON, `Authorization: Bearer`; `from`, `to` in +E.164,
  `text`, `messaging_profile_id`, `webhook_url`, ...), answered with the
  message object under `data` (`id`, `to[].status`, `parts`, `errors`);
- errors: https://developers.telnyx.com/development/api-fundamentals/api-errors
  (`{"errors": [{"code", "title", "detail", "source"}]}`; 401 code 10009,
  invalid number 10002) and .../reliability/rate-limiting (429 code 10011 with
  `x-ratelimit-*` headers, no Retry-After);
- webhooks: https://developers.telnyx.com/docs/messaging/messages/receiving-webhooks
  (`message.sent` / `message.finalized` events, the message object as
  `data.payload`), signed as Telnyx's SDK verifies them
  (`telnyx-signature-ed25519` = Ed25519 over `"{telnyx-timestamp}|{body}"`).

Telnyx publishes an OpenAPI description but states no licence for it, so it is
not vendored: the fake checks requests against the fields those pages list and
refuses any other, rather than ignoring it as Telnyx would.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.carriers.fake_server import (
    FakeAccount,
    Hang,
    Reply,
    Signing,
    bearer_token,
    billed_segments,
    is_unicode,
    media_type,
    post_callback,
)

MESSAGES_PATH = "/v2/messages"
VALID_FROM = "+15550001234"
INVALID_TO = "+15005550001"
_FIELDS = frozenset(
    {
        "from",
        "to",
        "text",
        "subject",
        "media_urls",
        "messaging_profile_id",
        "type",
        "auto_detect",
        "webhook_url",
        "webhook_failover_url",
        "use_profile_webhooks",
    }
)
_E164 = re.compile(r"\+[1-9]\d{6,14}")


def telnyx_error(code: str, title: str, detail: str, pointer: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "title": title, "detail": detail}
    if pointer is not None:
        error["source"] = {"pointer": pointer}
    return {"errors": [error]}


@dataclass(frozen=True)
class CreatedAs:
    """Create the next message with its recipient already in this status."""

    status: str
    error_code: str | None = None


Step = Reply | Hang | CreatedAs
# How a callback is signed: properly, by someone else, too long ago, or not at all.


@dataclass
class FakeTelnyx(FakeAccount[dict[str, Any], dict[str, Any]]):
    """One Telnyx account: its API key and the Ed25519 key it signs webhooks with."""

    api_key: str
    signing_key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)

    @property
    def public_key(self) -> str:
        raw = self.signing_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return base64.b64encode(raw).decode()

    def callback_url(self, message_id: str) -> str:
        url: str = self.messages[message_id]["webhook_url"]
        return url

    def id_for(self, to: str) -> str:
        [found] = [key for key, sent in self.messages.items() if sent["to"] == to]
        return found

    def routes(self) -> list[Route]:
        return [Route(MESSAGES_PATH, self._create, methods=["POST"])]

    def webhook(self, message_id: str, status: str, *, error_code: str | None = None) -> bytes:
        """The body of the webhook Telnyx posts when `message_id` reaches `status`."""
        sent = self.messages[message_id]
        final = status not in {"queued", "sending", "sent"}
        payload = _message(message_id, sent, status, error_code)
        event = {
            "data": {
                "event_type": "message.finalized" if final else "message.sent",
                "id": str(uuid.uuid4()),
                "occurred_at": datetime.now(UTC).isoformat(),
                "payload": payload,
                "record_type": "event",
            },
            "meta": {"attempt": 1, "delivered_to": sent.get("webhook_url")},
        }
        return json.dumps(event).encode()

    def signed(self, body: bytes, *, at: float | None = None) -> dict[str, str]:
        timestamp = str(int(time.time() if at is None else at))
        signature = self.signing_key.sign(f"{timestamp}|".encode() + body)
        return {
            "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
            "telnyx-timestamp": timestamp,
            "content-type": "application/json",
        }

    async def send_status(
        self,
        message_id: str,
        status: str,
        *,
        error_code: str | None = None,
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a webhook to the message's `webhook_url`, signed as asked; the answer's status."""
        body = self.webhook(message_id, status, error_code=error_code)
        headers = {"content-type": "application/json"}
        if signing == "signed":
            headers = self.signed(body)
        elif signing == "stale":
            headers = self.signed(body, at=time.time() - 600)
        elif signing == "forged":
            headers = FakeTelnyx(api_key=self.api_key).signed(body)
        url = self.messages[message_id]["webhook_url"]
        return await post_callback(url, verify=verify, content=body, headers=headers)

    async def _create(self, request: Request) -> Response:
        if bearer_token(request) != self.api_key:
            return _error(401, telnyx_error("10009", "Authentication failed", "Bad API key"))
        if media_type(request) != "application/json":
            return self._violation(f"body is {media_type(request) or 'untyped'}, not JSON")
        try:
            body = json.loads(await request.body())
        except ValueError:
            return self._violation("body is not JSON")
        problems = _request_errors(body)
        if problems:
            return self._violation("; ".join(problems))
        self.received.append(body)
        if body["to"] == INVALID_TO:
            error = telnyx_error(
                "10002", "Invalid phone number", "The 'to' number is invalid", "/to"
            )
            return _error(400, error)
        return await self._answer(body)

    async def _answer(self, body: dict[str, Any]) -> Response:
        step = self.script.next() or CreatedAs("queued")
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        message_id = str(uuid.uuid4())
        self.messages[message_id] = body
        return JSONResponse({"data": _message(message_id, body, step.status, step.error_code)})

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return _error(422, telnyx_error("99999", "Contract violation", reason))


def _request_errors(body: object) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    problems = [
        f"field not in the send-message reference: {key}" for key in sorted(body.keys() - _FIELDS)
    ]
    for key in ("to", "text"):
        if not isinstance(body.get(key), str) or not body[key]:
            problems.append(f"{key} is required")
    if not body.get("from") and not body.get("messaging_profile_id"):
        problems.append("from or messaging_profile_id is required")
    if isinstance(body.get("to"), str) and not _E164.fullmatch(body["to"]):
        problems.append("to must be +E.164")
    url = body.get("webhook_url")
    if url is not None and (
        not isinstance(url, str) or urlsplit(url).scheme not in {"http", "https"}
    ):
        problems.append("webhook_url must be an http(s) URL")
    return problems


def _message(
    message_id: str, sent: Mapping[str, Any], status: str, error_code: str | None
) -> dict[str, Any]:
    errors = (
        [] if error_code is None else [telnyx_error(error_code, "Delivery failed", "")["errors"][0]]
    )
    return {
        "record_type": "message",
        "id": message_id,
        "direction": "outbound",
        "type": "SMS",
        "from": {"phone_number": sent.get("from"), "carrier": "Telnyx", "line_type": "Wireless"},
        "to": [
            {
                "phone_number": sent["to"],
                "status": status,
                "carrier": "T-Mobile",
                "line_type": "Wireless",
            }
        ],
        "text": sent["text"],
        "encoding": "UCS-2" if is_unicode(sent["text"]) else "GSM-7",
        "parts": billed_segments(sent["text"]),
        "messaging_profile_id": sent.get("messaging_profile_id"),
        "webhook_url": sent.get("webhook_url"),
        "errors": errors,
    }


def _error(status: int, body: Mapping[str, Any]) -> Response:
    return JSONResponse(dict(body), status_code=status)
