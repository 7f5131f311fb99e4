"""HTTP routes of the Send API: deliver a code the client generated."""

from __future__ import annotations

from datetime import datetime

from starlette.responses import Response

from relay.errors import ResourceMissing
from relay.ids import is_id
from relay.log import bind
from relay.messages.models import Message, as_shown
from relay.messages.service import SendRequest
from relay.web.fields import require_locale, require_webhook_url
from relay.web.idempotency import answer, renders
from relay.web.operations import Call, Operation
from relay.web.responses import JsonResponse
from relay.web.schemas import MessageObject, SendMessageBody


async def send(call: Call) -> Response:
    app, body = call.services, call.body
    assert isinstance(body, SendMessageBody)
    require_webhook_url(body.webhook_url, allowed=app.settings.webhook_allowed_networks)
    request = SendRequest(
        to=body.to,
        code=body.code,
        locale=require_locale(body.locale),
        metadata=body.metadata,
        webhook_url=body.webhook_url,
    )
    claim = renders(_render)
    message = await app.messages.send(call.who, request)
    bind(message_id=message.id)
    return answer(claim, message, app.clock.now(), _render)


def _render(message: Message, now: datetime) -> Response:
    # As the unit that made it shows it in its last event, if it records one (`as_shown`).
    return JsonResponse(as_shown(message))


async def retrieve(call: Call) -> Response:
    message_id = call.path["message_id"]
    if not is_id(message_id, "msg"):
        raise ResourceMissing(f"No such message: {message_id}", param="id")
    message = await call.services.messages.retrieve(call.who, message_id)
    bind(message_id=message.id)
    return JsonResponse(message.to_api())


_LINKS = {
    "RetrieveMessage": {
        "operationId": "retrieve_message",
        "parameters": {"message_id": "$response.body#/id"},
    },
}

OPERATIONS = [
    Operation(
        "POST",
        "/v1/messages",
        send,
        "send_message",
        summary="Send a message",
        description="Deliver your own `code` to `to` through Relay's routes. The code is "
        "sealed while failover may need it, never returned, and erased once the message "
        "is final.",
        body=SendMessageBody,
        response=MessageObject,
        links=_LINKS,
        tags=("messages",),
    ),
    Operation(
        "GET",
        "/v1/messages/{message_id}",
        retrieve,
        "retrieve_message",
        summary="Retrieve a message",
        response=MessageObject,
        tags=("messages",),
    ),
]
