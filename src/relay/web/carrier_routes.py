"""Delivery status callbacks from HTTP carriers: `POST /v1/carriers/{name}/status`.

Not authenticated by API key: each provider signs its callbacks its own way
(Twilio's `X-Twilio-Signature`, Telnyx's Ed25519 signature, Meta's
`X-Hub-Signature-256`, ...) or, where it signs nothing, the callback URL
carries the carrier's secret. The signature is checked before anything is
read from the database; an unsigned, forged, stale or replayed callback
answers 401 and changes nothing, and past the carrier's failure budget 429
(`relay.web.callback_budget`); a correctly signed one is always processed.
`GET` on the same path answers the subscription check of providers that make
one (Meta's `hub.challenge`), 401 unless it names the carrier's verify token.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
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
from relay.delivery.callback_nonces import CallbackNonces
from relay.errors import ParameterInvalid, ResourceMissing
from relay.web.callback_budget import CallbackFailures
from relay.web.operations import Call, Operation

log = logging.getLogger("relay.callbacks")
# How many signature header names a debug line lists at most (anyone may send thousands).
_NAMES_LOGGED = 16


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
    _log_signature_headers(name, callback.headers)
    try:
        await carrier.receive_status(callback, nonces=CallbackNonces(call.services.db))
    except CallbackSignatureError as exc:
        message = "The callback signature does not match."
        raise await _failures(call).refusal(name, str(exc), message) from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    return Response(status_code=carrier.callback_answer)


async def carrier_handshake(call: Call) -> Response:
    name = call.path["name"]
    carrier = call.services.delivery.carriers.carriers.get(name)
    if not isinstance(carrier, AnswersSubscriptionHandshake):
        raise ResourceMissing(f"No carrier named {name!r} answers a handshake.", param="name")
    try:
        challenge = carrier.answer_handshake(_query(call))
    except CallbackSignatureError as exc:
        message = "The verify token does not match."
        raise await _failures(call).refusal(name, str(exc), message) from exc
    except CallbackPayloadError as exc:
        raise ParameterInvalid(str(exc)) from exc
    # Plain text and nosniff: the echoed challenge is never read as a page.
    return PlainTextResponse(challenge, headers={"X-Content-Type-Options": "nosniff"})


def _failures(call: Call) -> CallbackFailures:
    failures = call.scope["app"].state.callback_failures
    assert isinstance(failures, CallbackFailures)
    return failures


def _log_signature_headers(carrier: str, headers: Mapping[str, str]) -> None:
    """At debug level, which signature headers came (names only, never values): how an
    operator learns what their provider account sends (docs/delivery.md)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    names = sorted(name for name in headers if "signature" in name)[:_NAMES_LOGGED]
    log.debug(
        "carrier.callback_headers",
        extra={"carrier": carrier, "signature_headers": ",".join(names) or "-"},
    )


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
