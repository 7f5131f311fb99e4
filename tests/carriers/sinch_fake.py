"""A local Sinch that speaks the SMS REST API (XMS) as Sinch documents it.

Built from Sinch's published reference:

- send: https://developers.sinch.com/docs/sms/api-reference/sms/overview
  (`POST /xms/v1/{service_plan_id}/batches`, JSON, `Authorization: Bearer`;
  `mt_text` batches: `to[]`, `from`, `body`, `delivery_report`,
  `callback_url`, ...), answered 201 with the batch (`id`, ...); errors as
  `{"code", "text"}` (400), 401 for a bad token, 403, 429, 5xx;
- reports: https://developers.sinch.com/docs/sms/api-reference/sms/tag/Delivery-reports/
  and the SDK's RecipientDeliveryReport (`recipient_delivery_report_sms`:
  `batch_id`, `recipient`, `code`, `status`, `at`, ...) posted to
  `callback_url`;
- signing: https://developers.sinch.com/docs/sms/api-reference/sms/tag/Webhooks/
  (optional HMAC per service plan: `x-sinch-webhook-signature` over
  `"{body}.{nonce}.{timestamp}"`, as Sinch's SDKs validate it).

Sinch offers its OpenAPI description for download without stating a licence,
so it is not vendored: the fake checks requests against the fields of the
batch reference and refuses any other.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

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
    impostor_url,
    media_type,
    post_callback,
)

BATCHES_PATH = "/xms/v1/{service_plan_id}/batches"
INVALID_TO = "+15005550001"
_FIELDS = frozenset(
    {
        "to",
        "from",
        "body",
        "type",
        "delivery_report",
        "send_at",
        "expire_at",
        "callback_url",
        "client_reference",
        "feedback_enabled",
        "flash_message",
        "parameters",
        "truncate_concat",
        "max_number_of_message_parts",
    }
)
_REPORTS = frozenset({"none", "summary", "full", "per_recipient", "per_recipient_final"})


def sinch_error(code: str, text: str) -> dict[str, str]:
    return {"code": code, "text": text}


def sign(secret: str, body: bytes, nonce: str, timestamp: str) -> str:
    """The HMAC Sinch's SDKs check, written apart from Relay's."""
    message = b".".join([body, nonce.encode(), timestamp.encode()])
    return base64.b64encode(hmac.new(secret.encode(), message, hashlib.sha256).digest()).decode()


@dataclass
class FakeSinch(FakeAccount[dict[str, Any], dict[str, Any]]):
    """One service plan; with `signature_secret`, its callbacks are HMAC-signed."""

    service_plan_id: str
    api_token: str
    signature_secret: str | None = None

    def id_for(self, to: str) -> str:
        [found] = [key for key, sent in self.messages.items() if sent["to"] == [to]]
        return found

    def callback_url(self, message_id: str) -> str:
        url: str = self.messages[message_id]["callback_url"]
        return url

    def routes(self) -> list[Route]:
        return [Route(BATCHES_PATH, self._send, methods=["POST"])]

    def report(self, batch_id: str, status: str, *, code: int = 0) -> bytes:
        sent = self.messages[batch_id]
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        report = {
            "type": "recipient_delivery_report_sms",
            "batch_id": batch_id,
            "recipient": sent["to"][0],
            "code": code,
            "status": status,
            "at": now,
            "operator_status_at": now,
            "applied_originator": sent.get("from"),
            "encoding": "GSM",
            "number_of_message_parts": billed_segments(sent["body"]),
        }
        return json.dumps(report).encode()

    def signed(
        self, body: bytes, *, secret: str | None = None, at: float | None = None
    ) -> dict[str, str]:
        nonce, timestamp = secrets.token_hex(8), str(int(time.time() if at is None else at))
        return {
            "content-type": "application/json",
            "x-sinch-webhook-signature": sign(
                secret or self.signature_secret or "", body, nonce, timestamp
            ),
            "x-sinch-webhook-signature-nonce": nonce,
            "x-sinch-webhook-signature-timestamp": timestamp,
            "x-sinch-webhook-signature-algorithm": "HmacSHA256",
        }

    async def send_status(
        self,
        message_id: str,
        status: str,
        *,
        error_code: int = 0,
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a per-recipient report, signed as asked, to the batch's `callback_url`."""
        body = self.report(message_id, status, code=error_code)
        url, headers = self.callback_url(message_id), {"content-type": "application/json"}
        if self.signature_secret is None:
            url = impostor_url(url, signing)
        elif signing == "signed":
            headers = self.signed(body)
        elif signing == "stale":
            headers = self.signed(body, at=time.time() - 600)
        elif signing == "forged":
            headers = self.signed(body, secret="not-" + self.signature_secret)
        return await post_callback(url, verify=verify, content=body, headers=headers)

    async def _send(self, request: Request) -> Response:
        if bearer_token(request) != self.api_token:
            return Response(status_code=401)
        if request.path_params["service_plan_id"] != self.service_plan_id:
            return JSONResponse(sinch_error("forbidden", "Unknown service plan"), status_code=403)
        if media_type(request) != "application/json":
            return self._violation(f"body is {media_type(request) or 'untyped'}, not JSON")
        try:
            batch = json.loads(await request.body())
        except ValueError:
            return self._violation("body is not JSON")
        problems = _request_errors(batch)
        if problems:
            return self._violation("; ".join(problems))
        self.received.append(batch)
        if INVALID_TO in batch["to"]:
            error = sinch_error("syntax_invalid_parameter_format", "Invalid recipient")
            return JSONResponse(error, status_code=400)
        step = self.script.next()
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        return JSONResponse(self._created(batch), status_code=201)

    def _created(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        batch_id = "01" + secrets.token_hex(12).upper()
        self.messages[batch_id] = dict(batch)
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return {
            "id": batch_id,
            "to": batch["to"],
            "from": batch.get("from"),
            "canceled": False,
            "body": batch["body"],
            "type": "mt_text",
            "created_at": now,
            "modified_at": now,
            "delivery_report": batch.get("delivery_report", "none"),
            "callback_url": batch.get("callback_url"),
            "flash_message": False,
        }

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return JSONResponse(sinch_error("syntax_constraint_violation", reason), status_code=400)


def _request_errors(batch: object) -> list[str]:
    if not isinstance(batch, dict):
        return ["body is not a JSON object"]
    problems = [
        f"field not in the batch reference: {key}" for key in sorted(batch.keys() - _FIELDS)
    ]
    to = batch.get("to")
    if not isinstance(to, list) or not to or not all(isinstance(n, str) for n in to):
        problems.append("to must be a non-empty list of numbers")
    body = batch.get("body")
    if not isinstance(body, str) or not body or len(body) > 2000:
        problems.append("body must be 1 to 2000 characters")
    if batch.get("delivery_report", "none") not in _REPORTS:
        problems.append("delivery_report is not one of the documented values")
    url = batch.get("callback_url")
    if url is not None and urlsplit(str(url)).scheme not in {"http", "https"}:
        problems.append("callback_url must be an http(s) URL")
    return problems
