"""A local Twilio that holds Relay to Twilio's published contract.

The request and response shapes come from Twilio's own OpenAPI description,
`tests/carriers/vendor/twilio/twilio_api_v2010.json` (vendored; see its README),
not from our reading of it: the fake refuses any parameter the `CreateMessage`
requestBody does not declare (real Twilio ignores them silently, which would
hide a typo), and checks its
own answers against `api.v2010.account.message`.

That document does not describe error bodies for Messages nor the status
callback form. Errors use the `{code, message, more_info, status}` body the
document gives elsewhere; callbacks use the fields of Twilio's "status
callback" documentation (MessageSid, MessageStatus, ErrorCode, ...), signed as
Twilio signs them (X-Twilio-Signature).
"""

from __future__ import annotations

import base64
import functools
import hmac
import json
import re
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jsonschema
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.carriers.fake_server import FakeAccount, Hang, Reply, basic_credentials, post_callback

SPEC_PATH = Path(__file__).resolve().parent / "vendor" / "twilio" / "twilio_api_v2010.json"
MESSAGES_PATH = "/2010-04-01/Accounts/{AccountSid}/Messages.json"
# The one error body the document spells out (Recordings, 408); Twilio uses it everywhere.
ERROR_BODY_PATH = "/2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}/Recordings/{Sid}.json"

# Twilio's test credentials treat these numbers specially; the fake does too.
VALID_FROM = "+15005550006"
INVALID_TO = "+15005550001"

CONTRACT_VIOLATION = 99999  # not a Twilio code: the fake's own "you broke the contract"


@dataclass(frozen=True)
class Contract:
    """The parts of twilio_api_v2010.json the Messages resource needs."""

    parameters: Mapping[str, Any]
    required: frozenset[str]
    request: jsonschema.protocols.Validator
    message: jsonschema.protocols.Validator
    message_properties: frozenset[str]
    error: jsonschema.protocols.Validator

    def request_errors(self, pairs: list[tuple[str, str]]) -> list[str]:
        """Why a form-encoded CreateMessage body breaks the document, if it does."""
        keys = [key for key, _ in pairs]
        unknown = sorted(set(keys) - self.parameters.keys())
        if unknown:
            return [f"parameter not in CreateMessageRequest: {name}" for name in unknown]
        repeated = sorted({k for k in keys if keys.count(k) > 1 and not self._is_array(k)})
        if repeated:
            return [f"parameter given twice: {name}" for name in repeated]
        document = self._typed(pairs)
        return [error.message for error in self.request.iter_errors(document)]

    def message_errors(self, body: Mapping[str, Any]) -> list[str]:
        missing = sorted(self.message_properties - body.keys())
        errors = [f"message property missing: {name}" for name in missing]
        return errors + [error.message for error in self.message.iter_errors(body)]

    def _is_array(self, key: str) -> bool:
        return bool(self.parameters[key].get("type") == "array")

    def _typed(self, pairs: list[tuple[str, str]]) -> dict[str, Any]:
        document: dict[str, Any] = {}
        for key, value in pairs:
            if self._is_array(key):
                document.setdefault(key, []).append(value)
            else:
                document[key] = _coerce(self.parameters[key].get("type"), value)
        return document


@functools.cache
def contract() -> Contract:
    spec = json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    components = _nullable_to_json_schema(spec["components"])
    operation = spec["paths"][MESSAGES_PATH]["post"]
    form = operation["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    created = operation["responses"]["201"]["content"]["application/json"]["schema"]
    message = _resolve(spec, created["$ref"])
    error = spec["paths"][ERROR_BODY_PATH]["post"]["responses"]["408"]["content"]
    return Contract(
        parameters=form["properties"],
        required=frozenset(form.get("required", [])),
        request=_validator(form, components),
        message=_validator({"$ref": created["$ref"]}, components),
        message_properties=frozenset(message["properties"]),
        error=_validator(error["application/json"]["schema"], components),
    )


def _resolve(spec: Mapping[str, Any], ref: str) -> dict[str, Any]:
    node: Any = spec
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def _validator(schema: Mapping[str, Any], components: Any) -> jsonschema.protocols.Validator:
    # OpenAPI refs point into the whole document; carry `components` along.
    root = {**schema, "components": components}
    return jsonschema.Draft7Validator(root, format_checker=_formats())


def _nullable_to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 `nullable: true` is `type: [T, "null"]` in JSON Schema."""
    if isinstance(node, list):
        return [_nullable_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _nullable_to_json_schema(value) for key, value in node.items()}
    if converted.pop("nullable", False) and "type" in converted:
        converted["type"] = [converted["type"], "null"]
    return converted


def _formats() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()

    @checker.checks("date-time-rfc-2822", raises=(TypeError, ValueError))
    def _rfc_2822(value: object) -> bool:
        return not isinstance(value, str) or parsedate_to_datetime(value).tzinfo is not None

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        # The document: "URL must contain a valid hostname and underscores are not allowed".
        if not isinstance(value, str):
            return True
        parts = urlsplit(value)
        return (
            parts.scheme in {"http", "https"} and bool(parts.hostname) and "_" not in parts.netloc
        )

    return checker


def _coerce(kind: object, value: str) -> object:
    if kind == "boolean" and value in {"true", "false"}:
        return value == "true"
    if kind in {"integer", "number"} and re.fullmatch(r"-?\d+(\.\d+)?", value):
        return int(value) if kind == "integer" and value.lstrip("-").isdigit() else float(value)
    return value


def twilio_error(status: int, code: int, message: str) -> dict[str, Any]:
    """An error body shaped like the one the document gives."""
    body: dict[str, Any] = {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    contract().error.validate(body)
    return body


def sign(auth_token: str, url: str, form: Mapping[str, str]) -> str:
    """X-Twilio-Signature, written apart from Relay's so one cannot excuse the other."""
    data = url + "".join(f"{key}{form[key]}" for key in sorted(form))
    return base64.b64encode(hmac.new(auth_token.encode(), data.encode(), "sha1").digest()).decode()


@dataclass(frozen=True)
class CreatedAs:
    """Create the next message, but already in this status."""

    status: str
    error_code: int | None = None


Step = Reply | Hang | CreatedAs


@dataclass
class Message:
    sid: str
    form: Mapping[str, str]


@dataclass
class FakeTwilio(FakeAccount[Mapping[str, str], Message]):
    """One Twilio account that speaks the Messages resource."""

    account_sid: str
    auth_token: str

    @property
    def messages_url(self) -> str:
        return self.base_url + MESSAGES_PATH.format(AccountSid=self.account_sid)

    def routes(self) -> list[Route]:
        return [Route(MESSAGES_PATH, self._create, methods=["POST"])]

    async def send_status(
        self,
        sid: str,
        status: str,
        *,
        error_code: int | None = None,
        token: str | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a signed status callback for `sid`, as Twilio does; the answer's status."""
        message = self.messages[sid]
        url = message.form["StatusCallback"]
        form = self._callback_form(message, status, error_code)
        signature = sign(token or self.auth_token, url, form)
        return await post_callback(
            url, verify=verify, data=form, headers={"X-Twilio-Signature": signature}
        )

    def _callback_form(
        self, message: Message, status: str, error_code: int | None
    ) -> dict[str, str]:
        sent = message.form
        form = {
            "AccountSid": self.account_sid,
            "ApiVersion": "2010-04-01",
            "From": sent.get("From", VALID_FROM),
            "MessageSid": message.sid,
            "MessageStatus": status,
            "SmsSid": message.sid,
            "SmsStatus": status,
            "To": sent["To"],
        }
        if "MessagingServiceSid" in sent:
            form["MessagingServiceSid"] = sent["MessagingServiceSid"]
        if error_code is not None:
            form["ErrorCode"] = str(error_code)
        return form

    async def _create(self, request: Request) -> Response:
        refusal = self._authenticate(request) or self._content_type(request)
        if refusal is not None:
            return refusal
        pairs = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        refusal = self._contract(pairs) or self._semantics(dict(pairs))
        if refusal is not None:
            return refusal
        self.received.append(dict(pairs))
        return await self._answer(dict(pairs))

    def _authenticate(self, request: Request) -> Response | None:
        if basic_credentials(request) != (self.account_sid, self.auth_token):
            return _error(401, 20003, "Authenticate")
        if request.path_params["AccountSid"] != self.account_sid:
            return _error(404, 20404, "The requested resource was not found")
        return None

    def _content_type(self, request: Request) -> Response | None:
        media_type = request.headers.get("content-type", "").split(";")[0].strip()
        if media_type == "application/x-www-form-urlencoded":
            return None
        return self._violation(f"body is {media_type or 'untyped'}, not form-encoded")

    def _contract(self, pairs: list[tuple[str, str]]) -> Response | None:
        errors = contract().request_errors(pairs)
        return self._violation("; ".join(errors)) if errors else None

    def _semantics(self, form: Mapping[str, str]) -> Response | None:
        if not form.get("From") and not form.get("MessagingServiceSid"):
            return _error(400, 21603, "A 'From' phone number is required.")
        if not form.get("Body"):
            return _error(400, 21602, "Message body is required.")
        if form["To"] == INVALID_TO:
            return _error(400, 21211, f"The 'To' number {form['To']} is not a valid phone number.")
        return None

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return _error(400, CONTRACT_VIOLATION, f"Violates twilio_api_v2010.json: {reason}")

    async def _answer(self, form: Mapping[str, str]) -> Response:
        step = self.script.next() or CreatedAs("queued")
        if isinstance(step, Hang):
            return await self.script.hang()
        if isinstance(step, Reply):
            return step.response()
        return JSONResponse(self._created(form, step), status_code=201)

    def _created(self, form: Mapping[str, str], step: CreatedAs) -> dict[str, Any]:
        sid = "SM" + secrets.token_hex(16)
        self.messages[sid] = Message(sid=sid, form=form)
        body = _message_body(self.account_sid, sid, form, step)
        self.violations.extend(
            f"fake answered off-schema: {e}" for e in contract().message_errors(body)
        )
        return body


def _message_body(
    account_sid: str, sid: str, form: Mapping[str, str], step: CreatedAs
) -> dict[str, Any]:
    now = format_datetime(datetime.now(UTC))
    uri = f"/2010-04-01/Accounts/{account_sid}/Messages/{sid}"
    return {
        "account_sid": account_sid,
        "api_version": "2010-04-01",
        "body": form["Body"],
        "date_created": now,
        "date_sent": None,
        "date_updated": now,
        "direction": "outbound-api",
        "error_code": step.error_code,
        "error_message": None,
        "from": form.get("From"),
        "messaging_service_sid": form.get("MessagingServiceSid"),
        "num_media": "0",
        "num_segments": "1",
        "price": None,
        "price_unit": "USD",
        "sid": sid,
        "status": step.status,
        "subresource_uris": {"media": f"{uri}/Media.json"},
        "to": form["To"],
        "uri": f"{uri}.json",
    }


def _error(status: int, code: int, message: str) -> Response:
    return JSONResponse(twilio_error(status, code, message), status_code=status)
