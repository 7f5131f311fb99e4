"""Delivery status callbacks from HTTP carriers: `POST /v1/carriers/{name}/status`.

Not authenticated by API key: the provider signs each callback with the
carrier account's own secret (Twilio: `X-Twilio-Signature`), and an unsigned
or wrongly signed callback changes nothing.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from starlette.responses import Response

from relay.carriers.twilio import CallbackPayloadError, CallbackSignatureError, TwilioCarrier
from relay.errors import AuthenticationFailed, ParameterInvalid, ResourceMissing
from relay.web.routes import services_of

router = APIRouter(prefix="/v1", include_in_schema=False)


@router.post("/carriers/{name}/status")
async def carrier_status(name: str, request: Request) -> Response:
    carrier = services_of(request).delivery.carriers.carriers.get(name)
    if not isinstance(carrier, TwilioCarrier):
        raise ResourceMissing(f"No HTTP carrier named {name!r}.", param="name")
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParameterInvalid("The callback body is not UTF-8.") from exc
    form = dict(parse_qsl(text, keep_blank_values=True))
    signature = request.headers.get("X-Twilio-Signature")
    try:
        # The URL the provider signed is the one we gave it, whatever proxies did since.
        await carrier.handle_callback(carrier.status_callback_url, form, signature)
    except CallbackSignatureError as exc:
        raise AuthenticationFailed("The callback signature does not match.") from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    return Response(status_code=204)
