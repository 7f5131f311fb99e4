"""A local Plivo that speaks the Message API as Plivo documents it.

Built from Plivo's published reference:

- send: https://www.plivo.com/docs/sms/detailed-reference/api/message/send-a-message/
  (`POST /v1/Account/{auth_id}/Message/`, JSON only, HTTP Basic with Auth ID
  and Auth Token; `src`, `dst`, `text`, `url`, `method`, ...), answered 202
  with `{"message", "message_uuid": [...], "api_id"}`; errors as
  `{"api_id", "error"}` with 400 (a bad parameter), 401 (credentials), 5xx;
- callbacks: https://www.plivo.com/docs/messaging/api/message/message-status-callbacks
  (a form posted to `url`: `MessageUUID`, `Status`, `ErrorCode`, `Units`,
  the `...Time` fields, ...);
- signatures: https://docs.plivo.com/docs/messaging/concepts/signature-validation
  (V2: URL + nonce) and https://docs.plivo.com/docs/voice/xml/request/validation
  (V3: URL, sorted parameters and nonce), computed as Plivo's SDKs validate
  them. Which of the two SMS callbacks carry is not stated, so the fake sends
  both by default, as Plivo's own headers do for voice, or V2 alone (as the
  messaging page describes) or V3 alone when asked.

Plivo publishes no machine-readable description of this API, so the fake
checks requests against the fields of the send reference and refuses any other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.carriers.fake_server import (
    FakeAccount,
    Hang,
    Reply,
    Signing,
    basic_credentials,
    billed_segments,
    media_type,
    post_callback,
)

MESSAGE_PATH = "/v1/Account/{auth_id}/Message/"
Version = Literal["v2", "v3"]
INVALID_DST = "15005550001"
_FIELDS = frozenset(
    {
        "src",
        "dst",
        "text",
        "type",
        "url",
        "method",
        "log",
        "trackable",
        "powerpack_uuid",
        "media_urls",
    }
)


def plivo_error(text: str) -> dict[str, str]:
    return {"api_id": str(uuid.uuid4()), "error": text}


def sign_v3(token: str, url: str, params: Mapping[str, str], nonce: str) -> str:
    """V3 of a POST, written apart from Relay's: the URL's base, `?`, its sorted query
    (and `.` if any), the sorted parameters as key+value, `.`, the nonce."""
    parts = urlsplit(url)
    query = sorted(parse_qsl(parts.query, keep_blank_values=True))
    text = f"{parts.scheme}://{parts.netloc}{parts.path}?" + "&".join(k + "=" + v for k, v in query)
    text += "." if query else ""
    text += "".join(key + params[key] for key in sorted(params)) + "." + nonce
    return base64.b64encode(
        hmac.new(token.encode(), text.encode(), hashlib.sha256).digest()
    ).decode()


def sign_v2(token: str, url: str, nonce: str) -> str:
    base = url.split("?")[0]
    return base64.b64encode(
        hmac.new(token.encode(), (base + nonce).encode(), hashlib.sha256).digest()
    ).decode()


@dataclass
class FakePlivo(FakeAccount[dict[str, Any], dict[str, Any]]):
    """One Plivo account: its Auth ID and the Auth Token that also signs its callbacks."""

    auth_id: str
    auth_token: str
    # The URL, form and headers of the last callback posted: what a replay sends again.
    last_sent: tuple[str, dict[str, str], dict[str, str]] | None = field(default=None)

    def id_for(self, to: str) -> str:
        [found] = [key for key, sent in self.messages.items() if sent["dst"] == to.lstrip("+")]
        return found

    def callback_url(self, message_id: str) -> str:
        url: str = self.messages[message_id]["url"]
        return url

    def routes(self) -> list[Route]:
        return [Route(MESSAGE_PATH, self._send, methods=["POST"])]

    def callback(
        self,
        message_id: str,
        status: str,
        *,
        error_code: str | None = None,
        at: datetime | None = None,
    ) -> dict[str, str]:
        sent = self.messages[message_id]
        when = (at or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S.%f")
        form = {
            "MessageUUID": message_id,
            "ParentMessageUUID": message_id,
            "To": sent["dst"],
            "From": sent["src"],
            "Type": "sms",
            "Status": status,
            "Units": str(billed_segments(sent["text"])),
            "TotalRate": "0.0050",
            "TotalAmount": "0.0050",
            "MCC": "310",
            "MNC": "260",
            "PartInfo": "1 of 1",
            "Sequence": "1",
            "MessageTime": when,
            "QueuedTime": when,
            "SentTime": when,
            "DeliveryReportTime": when,
            "PowerpackUUID": "",
        }
        if error_code is not None:
            form["ErrorCode"] = error_code
        return form

    def headers(
        self,
        url: str,
        form: Mapping[str, str],
        *,
        token: str | None = None,
        versions: tuple[Version, ...] = ("v2", "v3"),
    ) -> dict[str, str]:
        """The signature headers of one callback: each version asked for, one nonce."""
        key, nonce = token or self.auth_token, secrets.token_hex(10)
        headers = {}
        if "v2" in versions:
            headers["X-Plivo-Signature-V2"] = sign_v2(key, url, nonce)
            headers["X-Plivo-Signature-Ma-V2"] = sign_v2(key, url, nonce)
            headers["X-Plivo-Signature-V2-Nonce"] = nonce
        if "v3" in versions:
            headers["X-Plivo-Signature-V3"] = sign_v3(key, url, form, nonce)
            headers["X-Plivo-Signature-Ma-V3"] = sign_v3(key, url, form, nonce)
            headers["X-Plivo-Signature-V3-Nonce"] = nonce
        return headers

    async def send_status(
        self,
        message_id: str,
        status: str,
        *,
        error_code: str | None = None,
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
        versions: tuple[Version, ...] = ("v2", "v3"),
    ) -> int:
        """POST a status callback, signed as asked with the `versions` asked, to the send's
        `url`; the answer's status."""
        stale = datetime.now(UTC) - timedelta(days=1) if signing == "stale" else None
        form = self.callback(message_id, status, error_code=error_code, at=stale)
        url = self.callback_url(message_id)
        headers = {}
        if signing != "unsigned":
            token = "someone-else" if signing == "forged" else None
            headers = self.headers(url, form, token=token, versions=versions)
        self.last_sent = (url, form, headers)
        return await post_callback(url, verify=verify, data=form, headers=headers)

    async def replay_last(
        self, *, verify: ssl.SSLContext | bool = True, changes: Mapping[str, str] | None = None
    ) -> int:
        """POST the last callback again, its signature headers as they were, its form
        with `changes` (what someone who captured it would send); the answer's status."""
        assert self.last_sent is not None, "no callback was sent"
        url, form, headers = self.last_sent
        return await post_callback(
            url, verify=verify, data={**form, **(changes or {})}, headers=headers
        )

    async def _send(self, request: Request) -> Response:
        if basic_credentials(request) != (self.auth_id, self.auth_token):
            return JSONResponse(plivo_error("authentication failed"), status_code=401)
        if request.path_params["auth_id"] != self.auth_id:
            return JSONResponse(plivo_error("not found"), status_code=404)
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
        if re.sub(r"[^\d]", "", body["dst"]) == INVALID_DST:
            return JSONResponse(plivo_error("invalid 'dst' parameter"), status_code=400)
        step = self.script.next()
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        message_id = str(uuid.uuid4())
        self.messages[message_id] = body
        answer = {
            "message": "message(s) queued",
            "message_uuid": [message_id],
            "api_id": str(uuid.uuid4()),
        }
        return JSONResponse(answer, status_code=202)

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return JSONResponse(plivo_error(f"contract violation: {reason}"), status_code=400)


def _request_errors(body: object) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    problems = [f"field not in the send reference: {key}" for key in sorted(body.keys() - _FIELDS)]
    for key in ("dst", "text"):
        if not isinstance(body.get(key), str) or not body[key]:
            problems.append(f"{key} is required")
    if not body.get("src") and not body.get("powerpack_uuid"):
        problems.append("src or powerpack_uuid is required")
    if body.get("method", "POST") not in {"GET", "POST"}:
        problems.append("method must be GET or POST")
    url = body.get("url")
    if url is not None and urlsplit(str(url)).scheme not in {"http", "https"}:
        problems.append("url must be an http(s) URL")
    return problems
