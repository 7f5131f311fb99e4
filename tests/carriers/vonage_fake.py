"""A local Vonage SMS API that holds Relay to Vonage's published contract.

Requests, answers and receipts follow Vonage's own OpenAPI description,
`tests/carriers/vendor/vonage/sms.yml` (vendored; see its README): the fake
refuses any send parameter `NewMessage` does not declare or a value it does
not allow, checks its answers against `SMS` / `Error` and its receipts against
`DeliveryReceipt`, and answers with the part statuses of the document's
`x-errors`. Where the document is silent it follows Vonage's pages:

- https://developer.vonage.com/messaging/sms/guides/troubleshooting-sms
  (one `messages[]` entry per billed part, each with its own id);
- https://developer.vonage.com/messaging/sms/building-blocks/receive-a-delivery-receipt
  (one receipt per part, posted to the send's `callback`);
- https://developer.vonage.com/getting-started/concepts/signing-messages
  (`sig` over the sorted parameters with `timestamp` and `nonce`; MD5 hash
  or HMAC with the signature secret), as Vonage's SDKs compute it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import secrets
import ssl
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import jsonschema
import yaml
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.carriers.fake_server import (
    FakeAccount,
    Hang,
    Reply,
    Signing,
    billed_segments,
    impostor_url,
    is_unicode,
    media_type,
    post_callback,
)

SPEC_PATH = Path(__file__).resolve().parent / "vendor" / "vonage" / "sms.yml"
SEND_PATH = "/sms/json"
INVALID_TO = "447700900001"


@dataclass(frozen=True)
class Contract:
    """The parts of sms.yml one send and its receipt need."""

    parameters: Mapping[str, Any]
    request: jsonschema.protocols.Validator
    # The document's 200 is `oneOf: [SMS, Error]`, which any object of either
    # shape satisfies twice; each answer is checked against the one it means.
    sent: jsonschema.protocols.Validator
    refused: jsonschema.protocols.Validator
    receipt: jsonschema.protocols.Validator
    receipt_statuses: frozenset[str]
    errors: frozenset[str]

    def request_errors(self, pairs: list[tuple[str, str]]) -> list[str]:
        keys = [key for key, _ in pairs]
        unknown = sorted(set(keys) - self.parameters.keys())
        if unknown:
            return [f"parameter not in NewMessage: {name}" for name in unknown]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            return [f"parameter given twice: {name}" for name in repeated]
        typed = {key: _coerce(self.parameters[key].get("type"), value) for key, value in pairs}
        return [error.message for error in self.request.iter_errors(typed)]


@functools.cache
def contract() -> Contract:
    spec = yaml.safe_load(SPEC_PATH.read_text(encoding="utf-8"))
    schemas = spec["components"]["schemas"]
    receipt = schemas["DeliveryReceipt"]
    return Contract(
        parameters=schemas["NewMessage"]["properties"],
        request=_validator(spec, {"$ref": "#/components/schemas/NewMessage"}),
        sent=_validator(spec, {"$ref": "#/components/schemas/SMS"}),
        refused=_validator(spec, {"$ref": "#/components/schemas/Error"}),
        receipt=_validator(spec, {"$ref": "#/components/schemas/DeliveryReceipt"}),
        receipt_statuses=frozenset(receipt["properties"]["status"]["x-possible-values"]),
        errors=frozenset(spec["x-errors"]),
    )


def _validator(
    spec: Mapping[str, Any], schema: Mapping[str, Any]
) -> jsonschema.protocols.Validator:
    # OpenAPI refs point into the whole document; carry `components` along.
    return jsonschema.Draft7Validator({**schema, "components": spec["components"]})


def _coerce(kind: object, value: str) -> object:
    if kind == "boolean" and value in {"true", "false"}:
        return value == "true"
    if kind == "integer" and value.lstrip("-").isdigit():
        return int(value)
    return value


def sign(params: Mapping[str, str], secret: str, method: str) -> str:
    """`sig` as Vonage's SDKs compute it, written apart from Relay's; upper hex, as sent."""
    pairs = sorted((k, v) for k, v in params.items() if k != "sig")
    text = "".join("&" + k + "=" + v.replace("&", "_").replace("=", "_") for k, v in pairs)
    if method == "md5hash":
        digest = hashlib.md5((text + secret).encode()).hexdigest()  # noqa: S324 (Vonage's scheme)
    else:
        digest = hmac.new(secret.encode(), text.encode(), getattr(hashlib, method)).hexdigest()
    return digest.upper()


def error_answer(status: str, text: str) -> dict[str, Any]:
    """An answer refusing the send with one of the document's `x-errors`."""
    assert status in contract().errors, f"{status} is not in sms.yml x-errors"
    body = {"message-count": "1", "messages": [{"status": status, "error-text": text}]}
    contract().refused.validate(body)
    return body


@dataclass
class FakeVonage(FakeAccount[dict[str, str], dict[str, str]]):
    """One Vonage account; with `signature_secret`, its receipts are signed."""

    api_key: str
    api_secret: str
    signature_secret: str | None = None
    signature_method: str = "md5hash"

    def id_for(self, to: str) -> str:
        """The first part's id of the SMS sent to `to` (+E.164 or digits)."""
        [found] = [
            key
            for key, sent in self.messages.items()
            if sent["to"] == to.lstrip("+") and sent["part"] == "1"
        ]
        return found

    def callback_url(self, message_id: str) -> str:
        return self.messages[message_id]["callback"]

    def routes(self) -> list[Route]:
        return [Route("/sms/{format}", self._send, methods=["POST"])]

    def receipt(self, message_id: str, status: str, *, error_code: str = "0") -> dict[str, str]:
        sent = self.messages[message_id]
        now = time.gmtime()
        params = {
            "msisdn": sent["to"],
            "to": sent["from"],
            "network-code": "23410",
            "messageId": message_id,
            "price": "0.03330000",
            "status": status,
            "scts": time.strftime("%y%m%d%H%M", now),
            "err-code": error_code,
            "api-key": self.api_key,
            "message-timestamp": time.strftime("%Y-%m-%d %H:%M:%S", now),
        }
        if status not in contract().receipt_statuses:
            self.violations.append(f"fake receipt status off the document: {status}")
        return params

    def signed(
        self, params: Mapping[str, str], *, secret: str | None = None, at: float | None = None
    ) -> dict[str, str]:
        signed = {
            **params,
            "timestamp": str(int(time.time() if at is None else at)),
            "nonce": str(uuid.uuid4()),
        }
        key = secret or self.signature_secret or ""
        return {**signed, "sig": sign(signed, key, self.signature_method)}

    async def send_status(
        self,
        message_id: str,
        status: str,
        *,
        error_code: str = "0",
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a receipt (JSON, as the document models it) to the send's `callback`."""
        params = self.receipt(message_id, status, error_code=error_code)
        url = self.callback_url(message_id)
        if self.signature_secret is None:
            url = impostor_url(url, signing)
        elif signing == "signed":
            params = self.signed(params)
        elif signing == "stale":
            params = self.signed(params, at=time.time() - 600)
        elif signing == "forged":
            params = self.signed(params, secret="not-" + self.signature_secret)
        self.violations.extend(
            f"fake receipt off-schema: {e.message}" for e in contract().receipt.iter_errors(params)
        )
        return await post_callback(
            url,
            verify=verify,
            content=json.dumps(params),
            headers={"content-type": "application/json"},
        )

    async def _send(self, request: Request) -> Response:
        if request.path_params["format"] != "json":
            return self._violation("Relay asks for JSON answers")
        if media_type(request) != "application/x-www-form-urlencoded":
            return self._violation(f"body is {media_type(request) or 'untyped'}, not form-encoded")
        pairs = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        problems = contract().request_errors(pairs)
        if problems:
            return self._violation("; ".join(problems))
        form = dict(pairs)
        if form.get("type", "text") == "text" and is_unicode(form.get("text", "")):
            return self._violation(
                "a text outside GSM sent as type=text would reach the handset mangled"
            )
        self.received.append(form)
        if (form["api_key"], form.get("api_secret")) != (self.api_key, self.api_secret):
            return _answer(error_answer("4", "Bad Credentials"))
        if form["to"] == INVALID_TO:
            return _answer(error_answer("3", "Invalid to address"))
        step = self.script.next()
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        return _answer(self._accepted(form))

    def _accepted(self, form: Mapping[str, str]) -> dict[str, Any]:
        parts = billed_segments(form.get("text", ""))
        entries = []
        for part in range(1, parts + 1):
            message_id = secrets.token_hex(8).upper()
            self.messages[message_id] = {**form, "part": str(part)}
            entry = {
                "to": form["to"],
                "message-id": message_id,
                "status": "0",
                "remaining-balance": "15.53590000",
                "message-price": "0.03330000",
                "network": "23410",
            }
            entries.append(entry)
        body = {"message-count": str(parts), "messages": entries}
        self.violations.extend(
            f"fake answered off-schema: {e.message}" for e in contract().sent.iter_errors(body)
        )
        return body

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return _answer(
            {
                "message-count": "1",
                "messages": [{"status": "3", "error-text": f"Violates sms.yml: {reason}"}],
            }
        )


def _answer(body: Mapping[str, Any]) -> Response:
    return JSONResponse(dict(body))
