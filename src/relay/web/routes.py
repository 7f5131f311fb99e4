"""HTTP routes of the Verify API: parse, call one service method, render."""

from __future__ import annotations

import re
from datetime import datetime

from starlette.responses import Response

from relay.carriers.base import Channel
from relay.email_address import parse_mailbox
from relay.errors import (
    ParameterInvalid,
    ParameterMissing,
    PhoneNumberInvalid,
    ResourceMissing,
)
from relay.idempotency.claims import Pending
from relay.ids import is_id
from relay.log import bind
from relay.verifications.destinations import is_email, require_channels
from relay.verifications.models import Verification, shown_json
from relay.verifications.pages import ListQuery
from relay.verifications.service import CreateRequest
from relay.web.fields import require_locale, require_webhook_url
from relay.web.idempotency import answer, renders
from relay.web.operations import Call, Operation
from relay.web.pagination import require_cursors
from relay.web.responses import JsonResponse
from relay.web.schemas import (
    E164_PATTERN,
    CancelBody,
    CheckVerificationBody,
    CreateVerificationBody,
    VerificationList,
    VerificationListQuery,
    VerificationObject,
)


def _render(verification: Verification, now: datetime) -> Response:
    # As the unit that made it shows it in its event, if it records one (`shown_json`).
    return JsonResponse.rendered(shown_json(verification, now))


def _answer(claim: Pending | None, verification: Verification, now: datetime) -> Response:
    bind(verification_id=verification.id)
    return answer(claim, verification, now, _render)


def _verification_id(value: str) -> str:
    if not is_id(value, "ver"):
        raise ResourceMissing(f"No such verification: {value}", param="id")
    return value


async def create(call: Call) -> Response:
    app, body = call.services, call.body
    assert isinstance(body, CreateVerificationBody)
    require_webhook_url(body.webhook_url, allowed=app.settings.webhook_allowed_networks)
    channels, param = _channels(body)
    request = CreateRequest(
        to=body.to,
        channels=channels,
        channels_param=param,
        locale=require_locale(body.locale),
        code_length=body.code_length,
        ttl=body.ttl,
        metadata=body.metadata,
        webhook_url=body.webhook_url,
    )
    claim = renders(_render)
    verification = await app.verifications.create(call.who, request)
    return _answer(claim, verification, app.clock.now())


def _channels(body: CreateVerificationBody) -> tuple[tuple[Channel, ...], str]:
    """The channels asked for, and the parameter that named them."""
    if body.channel is not None and body.channels is not None:
        raise ParameterInvalid("Give channel or channels, not both.", param="channels")
    if body.channels is not None:
        return require_channels(body.channels, param="channels"), "channels"
    return (body.channel or "sms",), "channel"


def _destination(to: str | None, *, query: bool = False) -> str | None:
    """What verifications are found by: an email address's mailbox (any spelling of it
    finds the verification opened for another), a number as it is.

    A malformed number is `phone_number_invalid` in a body, `parameter_invalid` as a
    list filter, as each was before email addresses were destinations.
    """
    if to is None:
        return None
    if is_email(to):
        return parse_mailbox(to)
    if not re.match(E164_PATTERN, to):
        if query:
            raise ParameterInvalid(
                "to must be a number in E.164 form or an email address.", param="to"
            )
        raise PhoneNumberInvalid(
            "The number must be in E.164 form, such as +14155552671.", param="to"
        )
    return to


async def check(call: Call) -> Response:
    app, body = call.services, call.body
    assert isinstance(body, CheckVerificationBody)
    if (body.id is None) == (body.to is None):
        if body.id is None:
            raise ParameterMissing("Give either id or to.", param="id")
        raise ParameterInvalid("Give either id or to, not both.", param="to")
    verification_id = None if body.id is None else _verification_id(body.id)
    claim = renders(_render)
    verification = await app.verifications.check(
        call.who, code=body.code, verification_id=verification_id, to=_destination(body.to)
    )
    return _answer(claim, verification, app.clock.now())


async def retrieve(call: Call) -> Response:
    app = call.services
    verification_id = _verification_id(call.path["verification_id"])
    verification = await app.verifications.retrieve(call.who, verification_id)
    bind(verification_id=verification.id)
    return JsonResponse(verification.to_api(app.clock.now()))


async def cancel(call: Call) -> Response:
    app = call.services
    verification_id = _verification_id(call.path["verification_id"])
    claim = renders(_render)
    verification = await app.verifications.cancel(call.who, verification_id)
    return _answer(claim, verification, app.clock.now())


async def list_verifications(call: Call) -> Response:
    app, params = call.services, call.query
    assert isinstance(params, VerificationListQuery)
    require_cursors(
        params.starting_after, params.ending_before, prefix="ver", noun="a verification id"
    )
    query = ListQuery(
        limit=params.limit,
        starting_after=params.starting_after,
        ending_before=params.ending_before,
        status=params.status,
        to=_destination(params.to, query=True),
        created_gte=params.created_gte,
        created_lt=params.created_lt,
    )
    page, has_more = await app.verifications.list(call.who, query)
    now = app.clock.now()
    return JsonResponse(
        {
            "object": "list",
            "url": "/v1/verifications",
            "data": [verification.to_api(now) for verification in page],
            "has_more": has_more,
        }
    )


_LINKS = {
    "RetrieveVerification": {
        "operationId": "retrieve_verification",
        "parameters": {"verification_id": "$response.body#/id"},
    },
    "CancelVerification": {
        "operationId": "cancel_verification",
        "parameters": {"verification_id": "$response.body#/id"},
    },
    "CheckVerification": {
        "operationId": "check_verification",
        "requestBody": {"id": "$response.body#/id", "code": "000000"},
    },
}

OPERATIONS = [
    Operation(
        "POST",
        "/v1/verifications",
        create,
        "create_verification",
        summary="Send a verification",
        description="Send a code to `to`. A second create for a number or mailbox that has a "
        "pending verification resends the same code and returns the same verification.",
        body=CreateVerificationBody,
        response=VerificationObject,
        links=_LINKS,
    ),
    Operation(
        "POST",
        "/v1/verifications/check",
        check,
        "check_verification",
        summary="Check a verification",
        description="Submit a code by verification `id`, or by `to` for that number's or "
        "mailbox's pending verification. At most 5 checks count.",
        body=CheckVerificationBody,
        response=VerificationObject,
    ),
    Operation(
        "GET",
        "/v1/verifications/{verification_id}",
        retrieve,
        "retrieve_verification",
        summary="Retrieve a verification",
        response=VerificationObject,
    ),
    Operation(
        "POST",
        "/v1/verifications/{verification_id}/cancel",
        cancel,
        "cancel_verification",
        summary="Cancel a verification",
        description="Close a pending verification. Cancelling a canceled one returns it unchanged.",
        body=CancelBody,
        body_required=False,
        response=VerificationObject,
    ),
    Operation(
        "GET",
        "/v1/verifications",
        list_verifications,
        "list_verifications",
        summary="List verifications",
        description="Newest first, keyset-paginated: pass the last id of a page as "
        "`starting_after`.",
        query=VerificationListQuery,
        response=VerificationList,
    ),
]
