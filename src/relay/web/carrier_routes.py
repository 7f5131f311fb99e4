"""Delivery status callbacks from HTTP carriers: `POST /v1/carriers/{name}/status`.

Not authenticated by API key: each provider signs its callbacks its own way
(Twilio's `X-Twilio-Signature`, Telnyx's Ed25519 signature, ...) or, where it
signs nothing, the callback URL carries the carrier's secret. An unsigned,
forged or stale callback answers 401 and changes nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.responses import Response

from relay.carriers.callbacks import (
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
    query = call.scope.get("query_string", b"").decode("latin-1")
    callback = StatusCallback(
        # The URL the provider signed is the one we gave it, whatever proxies did since.
        url=carrier.status_callback_url,
        body=call.raw_body,
        headers={key.lower(): value for key, value in Headers(scope=call.scope).items()},
        query=dict(parse_qsl(query, keep_blank_values=True)),
    )
    try:
        await carrier.receive_status(callback)
    except CallbackSignatureError as exc:
        raise AuthenticationFailed("The callback signature does not match.") from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    return Response(status_code=204)


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
]
