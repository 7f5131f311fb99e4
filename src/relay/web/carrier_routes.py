"""Delivery status callbacks from HTTP carriers: `POST /v1/carriers/{name}/status`.

Not authenticated by API key: each provider signs its callbacks its own way
(Twilio's `X-Twilio-Signature`, Telnyx's Ed25519 signature, Meta's
`X-Hub-Signature-256`, ...) or, where it signs nothing, the callback URL
carries the carrier's secret. An unsigned, forged or stale callback answers
401 and changes nothing. `GET` on the same path answers the subscription
check of providers that make one (Meta's `hub.challenge`), 401 unless it
names the carrier's verify token.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, Response

from relay.carriers.callbacks import (
    AnswersSubscriptionHandshake,
    CallbackPayloadError,
    CallbackSignatureError,
    ReceivesStatusCallbacks,
    StatusCallback,
)
from relay.errors import AuthenticationFailed, ParameterInvalid, ResourceMissing
from relay.web.operations import Call, Operation


async def carrier_status(call: Call) -> Response:
    name = call.path["name"]
    carrier = call.services.delivery.carriers.carriers.get(name)
    if not isinstance(carrier, ReceivesStatusCallbacks):
        raise ResourceMissing(f"No HTTP carrier named {name!r}.", param="name")
    callback = StatusCallback(
        # The URL the provider signed is the one we gave it, whatever proxies did since.
        url=carrier.status_callback_url,
        body=call.raw_body,
        headers={key.lower(): value for key, value in Headers(scope=call.scope).items()},
        query=_query(call),
    )
    try:
        await carrier.receive_status(callback)
    except CallbackSignatureError as exc:
        raise AuthenticationFailed("The callback signature does not match.") from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    return Response(status_code=204)


async def carrier_handshake(call: Call) -> Response:
    name = call.path["name"]
    carrier = call.services.delivery.carriers.carriers.get(name)
    if not isinstance(carrier, AnswersSubscriptionHandshake):
        raise ResourceMissing(f"No carrier named {name!r} answers a handshake.", param="name")
    try:
        challenge = carrier.answer_handshake(_query(call))
    except CallbackSignatureError as exc:
        raise AuthenticationFailed("The verify token does not match.") from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    # Plain text and nosniff: the echoed challenge is never read as a page.
    return PlainTextResponse(challenge, headers={"X-Content-Type-Options": "nosniff"})


def _query(call: Call) -> dict[str, str]:
    query = call.scope.get("query_string", b"").decode("latin-1")
    return dict(parse_qsl(query, keep_blank_values=True))


OPERATIONS = [
    Operation(
        "POST",
        "/v1/carriers/{name}/status",
        carrier_status,
        "carrier_status",
        authenticated=False,
        in_schema=False,
        raw_body=True,
        status=204,
    ),
    Operation(
        "GET",
        "/v1/carriers/{name}/status",
        carrier_handshake,
        "carrier_handshake",
        authenticated=False,
        in_schema=False,
        media_type="text/plain",
    ),
]
