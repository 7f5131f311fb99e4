"""A local Infobip that speaks the SMS API (v3) as Infobip documents it.

Built from Infobip's published reference:

- send: https://www.infobip.com/docs/sms/sms-over-api and the quickstart
  https://www.infobip.com/docs/developer-resources/quickstart
  (`POST /sms/3/messages`, JSON, `Authorization: App <key>`;
  `messages[].sender`, `destinations[].to`, `content.text`,
  `webhooks.delivery.url`), answered 200 with `bulkId` and
  `messages[].messageId` / `status`;
- statuses: https://www.infobip.com/docs/developer-resources/api-fundamentals/message-status-codes
  (groups PENDING, DELIVERED, UNDELIVERABLE, EXPIRED, REJECTED);
- reports: https://infobip.com/docs/api/channels/sms/sms-messaging/logs-and-status-reports/receive-outbound-sms-message-report
  (`{"results": [...]}` posted to the delivery URL, several per request).

Infobip documents no signature on delivery reports; where its OpenAPI
description lives and under which licence is unconfirmed, so nothing is
vendored and the fake checks requests against the fields of those pages.
"""

from __future__ import annotations

import json
import secrets
import ssl
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
    billed_segments,
    impostor_url,
    media_type,
    post_callback,
)

SEND_PATH = "/sms/3/messages"
REJECTED_TO = "4915100000001"
_MESSAGE_FIELDS = frozenset({"sender", "destinations", "content", "webhooks", "options"})
# (groupId, groupName, name) of the statuses the fake reports.
STATUSES = {
    "PENDING_ACCEPTED": (1, "PENDING", "PENDING_ACCEPTED"),
    "DELIVERED_TO_OPERATOR": (3, "DELIVERED", "DELIVERED_TO_OPERATOR"),
    "DELIVERED_TO_HANDSET": (3, "DELIVERED", "DELIVERED_TO_HANDSET"),
    "UNDELIVERABLE_NOT_DELIVERED": (2, "UNDELIVERABLE", "UNDELIVERABLE_NOT_DELIVERED"),
    "EXPIRED_EXPIRED": (4, "EXPIRED", "EXPIRED_EXPIRED"),
    "REJECTED_DESTINATION": (5, "REJECTED", "REJECTED_DESTINATION"),
}


def status(name: str) -> dict[str, Any]:
    group_id, group, exact = STATUSES[name]
    return {"groupId": group_id, "groupName": group, "id": 0, "name": exact, "description": exact}


def infobip_error(code: str, text: str) -> dict[str, Any]:
    return {
        "errorCode": code,
        "description": text,
        "action": None,
        "violations": [],
        "resources": [],
    }


@dataclass
class FakeInfobip(FakeAccount[dict[str, Any], dict[str, Any]]):
    """One Infobip account, known by its API key."""

    api_key: str

    def id_for(self, to: str) -> str:
        [found] = [key for key, sent in self.messages.items() if _to(sent) == to.lstrip("+")]
        return found

    def callback_url(self, message_id: str) -> str:
        url: str = self.messages[message_id]["webhooks"]["delivery"]["url"]
        return url

    def routes(self) -> list[Route]:
        return [Route(SEND_PATH, self._send, methods=["POST"])]

    def report(self, message_id: str, name: str, *, error: str | None = None) -> dict[str, Any]:
        sent, now = (
            self.messages[message_id],
            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000+0000"),
        )
        result = {
            "bulkId": "bulk-" + message_id,
            "messageId": message_id,
            "to": _to(sent),
            "sender": sent.get("sender"),
            "sentAt": now,
            "doneAt": now,
            "messageCount": billed_segments(sent["content"]["text"]),
            "mccMnc": "26201",
            "price": {"pricePerMessage": 0.01, "currency": "EUR"},
            "status": status(name),
        }
        if error is not None:
            result["error"] = {
                "groupId": 1,
                "groupName": "HANDSET_ERRORS",
                "id": 27,
                "name": error,
                "description": error,
                "permanent": True,
            }
        return result

    async def send_status(
        self,
        message_id: str,
        name: str,
        *,
        error_code: str | None = None,
        signing: Signing = "signed",
        verify: ssl.SSLContext | bool = True,
    ) -> int:
        """POST a report to the delivery URL (keeping its secret only when "signed")."""
        body = json.dumps({"results": [self.report(message_id, name, error=error_code)]})
        url = impostor_url(self.callback_url(message_id), signing)
        return await post_callback(
            url, verify=verify, content=body, headers={"content-type": "application/json"}
        )

    async def _send(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"App {self.api_key}":
            return JSONResponse(infobip_error("E401", "Invalid login details"), status_code=401)
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
        step = self.script.next()
        if isinstance(step, Reply):
            return step.response()
        if isinstance(step, Hang):
            return await self.script.hang()
        return JSONResponse(self._accepted(body["messages"][0]))

    def _accepted(self, message: Mapping[str, Any]) -> dict[str, Any]:
        message_id = secrets.token_hex(12)
        self.messages[message_id] = dict(message)
        name = "REJECTED_DESTINATION" if _to(message) == REJECTED_TO else "PENDING_ACCEPTED"
        answer = {"messageId": message_id, "status": status(name), "destination": _to(message)}
        return {"bulkId": "bulk-" + message_id, "messages": [answer]}

    def _violation(self, reason: str) -> Response:
        self.violations.append(reason)
        return JSONResponse(infobip_error("E400", f"contract violation: {reason}"), status_code=400)


def _to(message: Mapping[str, Any]) -> str:
    to: str = message["destinations"][0]["to"]
    return to


def _request_errors(body: object) -> list[str]:
    messages = body.get("messages") if isinstance(body, dict) else None
    if (
        not isinstance(body, dict)
        or set(body) != {"messages"}
        or not isinstance(messages, list)
        or not messages
    ):
        return ['body must be {"messages": [...]}']
    problems = []
    for message in messages:
        if not isinstance(message, dict):
            return ["a message is not an object"]
        problems += [
            f"field not in the SMS v3 reference: {key}"
            for key in sorted(message.keys() - _MESSAGE_FIELDS)
        ]
        destinations = message.get("destinations")
        if (
            not isinstance(destinations, list)
            or not destinations
            or not all(isinstance(d, dict) and isinstance(d.get("to"), str) for d in destinations)
        ):
            problems.append("destinations[].to is required")
        content = message.get("content")
        if (
            not isinstance(content, dict)
            or not isinstance(content.get("text"), str)
            or not content["text"]
        ):
            problems.append("content.text is required")
        url = message.get("webhooks", {}).get("delivery", {}).get("url")
        if url is not None and urlsplit(str(url)).scheme not in {"http", "https"}:
            problems.append("webhooks.delivery.url must be an http(s) URL")
    return problems
