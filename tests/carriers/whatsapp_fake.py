"""A local WhatsApp Business Cloud API that speaks as Meta documents it.

Built from Meta's published reference:

- send: https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates/auth-otp-template-messages
  (`POST /{version}/{phone-number-id}/messages`, JSON, `Authorization: Bearer`;
  `messaging_product: "whatsapp"`, `recipient_type: "individual"`, `to`,
  `type: "template"`, `template.name`, `template.language.code`, a `body`
  component and a `button` component (`sub_type: "url"`, `index: "0"`), each with
  one `text` parameter holding the same code of at most 15 characters),
  answered with `messaging_product`, `contacts[].input` / `wa_id` and
  `messages[].id` (`wamid.…`) / `message_status`;
- copy-code templates: https://developers.facebook.com/docs/whatsapp/business-management-api/authentication-templates/copy-code-button-authentication-templates
- errors: https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes
  (`{"error": {"message": "(#131026) Message undeliverable", "type", "code",
  "error_data": {"messaging_product", "details"}, "fbtrace_id"}}`; 190 an
  expired or invalid token (401), 132001 a template that does not exist in the
  language asked for, or is not approved in it (404), 132000 a parameter count
  mismatch, 100 an invalid parameter);
- languages: https://developers.facebook.com/documentation/business-messaging/whatsapp/templates/supported-languages
  (a template is approved per language, under one name: `en_US`, `fr`, `pt_BR`, `zh_CN`…);
- webhooks: https://developers.facebook.com/docs/graph-api/webhooks/getting-started
  (the `GET` verification with `hub.mode`, `hub.verify_token`, `hub.challenge`;
  `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body under the app secret>`)
  and https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples
  (`object: "whatsapp_business_account"`, `entry[].changes[].value.statuses[]`
  with `id`, `status`, `timestamp`, `recipient_id`, `errors[]` on `failed`).

Meta publishes no machine-readable description under a stated licence, so
nothing is vendored: the fake refuses any field those pages do not list,
where Meta might ignore it, and records the refusal as a violation.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.carriers.whatsapp_webhooks import signature
from tests.carriers.fake_server import (
    FakeAccount,
    Hang,
    Reply,
    Signing,
    bearer_token,
    media_type,
    post_callback,
)

_VERSION = re.compile(r"v\d{1,3}\.\d{1,3}")
_DIGITS = re.compile(r"[1-9]\d{6,14}")
_FIELDS = frozenset(
    {"messaging_product", "recipient_type", "to", "type", "template", "biz_opaque_callback_data"}
)
_TEMPLATE_FIELDS = frozenset({"name", "language", "components"})


def graph_error(code: int, title: str, details: str = "") -> dict[str, Any]:
    """A Graph API error body as the Cloud API answers it."""
    return {
        "error": {
            "message": f"(#{code}) {title}",
            "type": "OAuthException",
            "code": code,
            "error_data": {"messaging_product": "whatsapp", "details": details or title},
            "fbtrace_id": "A" + secrets.token_hex(10),
        }
    }


@dataclass
class FakeWhatsApp(FakeAccount[dict[str, Any], dict[str, Any]]):
    """One Meta app with one business phone number and its approved authentication templates.

    `templates` holds (name, language) pairs: Meta approves a template per
    language, and a send in any other language is refused with 132001.
    `webhook_url` is the Callback URL typed in the App Dashboard: every webhook
    goes there, whatever the message.
    """

    access_token: str
    app_secret: str
    phone_number_id: str = "106540352242922"
    waba_id: str = "102290129340398"
    templates: frozenset[tuple[str, str]] = frozenset({("relay_code", "en_US")})
    webhook_url: str = ""

    def routes(self) -> list[Route]:
        return [Route("/{version}/{number}/messages", self._create, methods=["POST"])]

    def id_for(self, to: str) -> str:
        [found] = [key for key, sent in self.messages.items() if sent["to"] == to.lstrip("+")]
        return found

    def code_sent_to(self, to: str) -> str:
        """The code the template carried to `to` (its body parameter)."""
        body = self.messages[self.id_for(to)]["template"]["components"][0]
        code: str = body["parameters"][0]["text"]
        return code

    def status_webhook(
        self,
        *updates: tuple[str, str] | tuple[str, str, int],
        incoming: bool = False,
    ) -> bytes:
        """A webhook reporting (message id, status[, error code]) of each update, as Meta
        batches them; with `incoming`, a user's text message rides along."""
        value: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": "15550783881",
                "phone_number_id": self.phone_number_id,
            },
            "statuses": [self._status(*update) for update in updates],
        }
        if incoming:
            value["contacts"] = [{"profile": {"name": "Kerry"}, "wa_id": "16315551181"}]
            value["messages"] = [
                {
                    "from": "16315551181",
                    "id": "wamid.incoming" + secrets.token_hex(8),
                    "timestamp": str(int(time.time())),
                    "type": "text",
                    "text": {"body": "this is a text message"},
                }
            ]
        change = {"value": value, "field": "messages"}
        document = {
            "object": "whatsapp_business_account",
            "entry": [{"id": self.waba_id, "changes": [change]}],
        }
        return json.dumps(document).encode()

    def headers(self, body: bytes, signing: Signing = "signed") -> dict[str, str]:
        """Meta's headers for `body`: signed with the app secret, another one, or not at all."""
        headers = {"content-type": "application/json"}
        # Meta signs no time: a "stale" webhook is signed like any other.
        if signing in {"signed", "stale"}:
            headers["x-hub-signature-256"] = signature(body, self.app_secret)
        elif signing == "forged":
            headers["x-hub-signature-256"] = signature(body, "not-" + self.app_secret)
        return headers

    async def send_status(
        self,
        message_id: str,
        status: str,
        *,
        error_code: int | None = None,
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a status webhook for one message to the Callback URL; Relay's answer's status."""
        update = (message_id, status) if error_code is None else (message_id, status, error_code)
        return await self.post_webhook(self.status_webhook(update), signing=signing, verify=verify)

    async def post_webhook(
        self, body: bytes, *, signing: Signing = "signed", verify: ssl.SSLContext | bool = True
    ) -> int:
        headers = self.headers(body, signing)
        return await post_callback(self.webhook_url, verify=verify, content=body, headers=headers)

    async def verify_callback_url(
        self, verify_token: str, *, verify: ssl.SSLContext | bool = True
    ) -> httpx.Response:
        """The check Meta makes when the Callback URL is saved in the App Dashboard."""
        params = {
            "hub.mode": "subscribe",
            "hub.challenge": str(secrets.randbelow(10**10)),
            "hub.verify_token": verify_token,
        }
        async with httpx.AsyncClient(timeout=5, verify=verify) as client:
            return await client.get(self.webhook_url, params=params)

    def _status(
        self, message_id: str, status: str, error_code: int | None = None
    ) -> dict[str, Any]:
        sent = self.messages.get(message_id, {})
        found: dict[str, Any] = {
            "id": message_id,
            "status": status,
            "timestamp": str(int(time.time())),
            "recipient_id": sent.get("to", "16315551181"),
        }
        if status in {"sent", "delivered"}:
            found["pricing"] = {
                "billable": True,
                "pricing_model": "PMP",
                "type": "regular",
                "category": "authentication",
            }
        if error_code is not None:
            found["errors"] = [
                {
                    "code": error_code,
                    "title": "Message undeliverable",
                    "message": "Message undeliverable",
                    "error_data": {"details": "Message Undeliverable."},
                    "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/",
                }
            ]
        return found

    async def _create(self, request: Request) -> Response:
        if bearer_token(request) != self.access_token:
            error = graph_error(190, "Error validating access token", "Invalid OAuth access token")
            return JSONResponse(error, status_code=401)
        number = request.path_params["number"]
        if number != self.phone_number_id:
            error = graph_error(100, "Invalid parameter", f"Object with ID '{number}' not found")
            return JSONResponse(error, status_code=400)
        if not _VERSION.fullmatch(request.path_params["version"]):
            return self._violation("the path's version is not a Graph API version")
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
        return await self._answer(body)

    async def _answer(self, body: dict[str, Any]) -> Response:
        step = self.script.next()
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        template = body["template"]
        if (template["name"], template["language"]["code"]) not in self.templates:
            details = "template name does not exist in the translation"
            error = graph_error(132001, "Template name does not exist in the translation", details)
            return JSONResponse(error, status_code=404)
        message_id = "wamid." + base64.b64encode(secrets.token_bytes(24)).decode()
        self.messages[message_id] = body
        return JSONResponse(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": body["to"], "wa_id": body["to"]}],
                "messages": [{"id": message_id, "message_status": "accepted"}],
            }
        )

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return JSONResponse(graph_error(100, "Invalid parameter", reason), status_code=400)


def _request_errors(body: object) -> list[str]:
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    problems = [
        f"field not in the messages reference: {key}" for key in sorted(body.keys() - _FIELDS)
    ]
    expected = {"messaging_product": "whatsapp", "recipient_type": "individual", "type": "template"}
    problems += [
        f"{key} must be {value!r}" for key, value in expected.items() if body.get(key) != value
    ]
    if not isinstance(body.get("to"), str) or not _DIGITS.fullmatch(body["to"]):
        problems.append("to must be the number's digits, country code first")
    template = body.get("template")
    if not isinstance(template, dict):
        return [*problems, "template is required"]
    return problems + _template_errors(template)


def _template_errors(template: Mapping[str, Any]) -> list[str]:
    problems = [
        f"template field not in the reference: {key}"
        for key in sorted(template.keys() - _TEMPLATE_FIELDS)
    ]
    if not isinstance(template.get("name"), str) or not template["name"]:
        problems.append("template.name is required")
    language = template.get("language")
    if not isinstance(language, dict) or not isinstance(language.get("code"), str):
        problems.append("template.language.code is required")
    components = template.get("components")
    if not isinstance(components, list) or len(components) != 2:
        return [*problems, "an authentication template takes a body and a button component"]
    body, button = components
    codes = [_parameter(body, "body"), _parameter(button, "button")]
    if (
        not isinstance(button, dict)
        or button.get("sub_type") != "url"
        or button.get("index") != "0"
    ):
        problems.append('the copy-code button is sub_type "url", index "0"')
    if None in codes or codes[0] != codes[1]:
        problems.append("the body and the button each carry the same one text parameter")
    elif len(codes[0] or "") > 15:
        problems.append("the code is at most 15 characters")
    return problems


def _parameter(component: object, kind: str) -> str | None:
    if not isinstance(component, dict) or component.get("type") != kind:
        return None
    allowed = {"type", "parameters"} | ({"sub_type", "index"} if kind == "button" else set())
    if component.keys() - allowed:
        return None
    parameters = component.get("parameters")
    if not isinstance(parameters, list) or len(parameters) != 1:
        return None
    [parameter] = parameters
    if not isinstance(parameter, dict) or parameter.keys() != {"type", "text"}:
        return None
    text = parameter["text"]
    return text if parameter["type"] == "text" and isinstance(text, str) and text else None
