"""The HTTP providers a `[carriers.NAME]` table may name with `kind = "http"`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from relay.carriers.http_carrier import HttpCarrier, HttpSettings, Provider
from relay.carriers.infobip import InfobipApi, InfobipSettings
from relay.carriers.plivo import PlivoApi, PlivoSettings
from relay.carriers.sinch import SinchApi, SinchSettings
from relay.carriers.telnyx import TelnyxApi, TelnyxSettings
from relay.carriers.twilio import TwilioApi, TwilioSettings
from relay.carriers.vonage import VonageApi, VonageSettings

# provider name → its settings and the protocol built from them.
_PROVIDERS: dict[str, tuple[type[HttpSettings], Callable[[Any], Provider]]] = {
    "twilio": (TwilioSettings, TwilioApi),
    "telnyx": (TelnyxSettings, TelnyxApi),
    "vonage": (VonageSettings, VonageApi),
    "plivo": (PlivoSettings, PlivoApi),
    "sinch": (SinchSettings, SinchApi),
    "infobip": (InfobipSettings, InfobipApi),
}


def http_settings(provider: str, **options: Any) -> HttpSettings:
    """The provider's settings from a carrier table (ValueError, TypeError when wrong)."""
    if provider not in _PROVIDERS:
        names = ", ".join(repr(name) for name in _PROVIDERS)
        raise ValueError(f"provider must be one of {names}")
    kind, _ = _PROVIDERS[provider]
    return kind(**options)


def http_carrier(
    settings: HttpSettings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] | None = None,
) -> HttpCarrier:
    """The carrier speaking the protocol of the provider `settings` belong to."""
    for kind, protocol in _PROVIDERS.values():
        if type(settings) is kind:
            return HttpCarrier(protocol(settings), settings, transport=transport, clock=clock)
    raise TypeError(f"no HTTP provider takes {type(settings).__name__}")
