"""Delivery status callbacks from HTTP carriers: `POST /v1/carriers/{name}/status`.

Not authenticated by API key: the provider signs each callback with the
carrier account's own secret (Twilio: `X-Twilio-Signature`), and an unsigned
or wrongly signed callback changes nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.responses import Response

from relay.carriers.twilio import CallbackPayloadError, CallbackSignatureError, TwilioCarrier
from relay.errors import AuthenticationFailed, ParameterInvalid, ResourceMissing
from relay.web.operations import Call, Operation


async def carrier_status(call: Call) -> Response:
    name = call.path["name"]
    carrier = call.services.delivery.carriers.carriers.get(name)
    if not isinstance(carrier, TwilioCarrier):
        raise ResourceMissing(f"No HTTP carrier named {name!r}.", param="name")
    try:
        text = call.raw_body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterInvalid("The callback body is not UTF-8.") from exc
    form = dict(parse_qsl(text, keep_blank_values=True))
    signature = Headers(scope=call.scope).get("X-Twilio-Signature")
    try:
        # The URL the provider signed is the one we gave it, whatever proxies did since.
        await carrier.handle_callback(carrier.status_callback_url, form, signature)
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
