"""HTTP routes of the Send API: deliver a code the client generated."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from relay.accounts.models import Caller
from relay.errors import ResourceMissing
from relay.ids import is_id
from relay.messages.service import SendRequest
from relay.services import Services
from relay.web.fields import require_locale, require_webhook_url
from relay.web.responses import JsonResponse
from relay.web.routes import ERRORS, CallerDep, ServicesDep
from relay.web.schemas import MessageObject, SendMessageBody

router = APIRouter(prefix="/v1", responses=ERRORS, tags=["messages"])

_LINKS = {
    "RetrieveMessage": {
        "operationId": "retrieve_message",
        "parameters": {"message_id": "$response.body#/id"},
    },
}


@router.post(
    "/messages",
    response_model=MessageObject,
    summary="Send a message",
    operation_id="send_message",
    responses={200: {"links": _LINKS}},
)
async def send_message(body: SendMessageBody, who: CallerDep, app: ServicesDep) -> Response:
    """Deliver your own `code` to `to` through Relay's routes. The code is sealed while
    failover may need it, never returned, and erased once the message is final."""
    return await send(app, who, body)


async def send(app: Services, who: Caller, body: SendMessageBody) -> Response:
    require_webhook_url(body.webhook_url, allowed=app.settings.webhook_allowed_networks)
    request = SendRequest(
        to=body.to,
        code=body.code,
        locale=require_locale(body.locale),
        metadata=body.metadata,
        webhook_url=body.webhook_url,
    )
    message = await app.messages.send(who, request)
    return JsonResponse(message.to_api())


@router.get(
    "/messages/{message_id}",
    response_model=MessageObject,
    summary="Retrieve a message",
    operation_id="retrieve_message",
)
async def retrieve_message(message_id: str, who: CallerDep, app: ServicesDep) -> Response:
    return await retrieve(app, who, message_id)


async def retrieve(app: Services, who: Caller, message_id: str) -> Response:
    if not is_id(message_id, "msg"):
        raise ResourceMissing(f"No such message: {message_id}", param="id")
    message = await app.messages.retrieve(who, message_id)
    return JsonResponse(message.to_api())
