"""The HTTP providers a `[carriers.NAME]` table may name with `kind = "http"`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from relay.carriers.http_carrier import HttpCarrier, HttpSettings
from relay.carriers.telnyx import TelnyxSettings, telnyx_carrier
from relay.carriers.twilio import TwilioCarrier, TwilioSettings
from relay.carriers.vonage import VonageSettings, vonage_carrier

Clock = Callable[[], datetime] | None

_SETTINGS: dict[str, type[HttpSettings]] = {
    "twilio": TwilioSettings,
    "telnyx": TelnyxSettings,
    "vonage": VonageSettings,
}


def provider_names() -> list[str]:
    return list(_SETTINGS)


def http_settings(provider: str, **options: Any) -> HttpSettings:
    """The provider's settings from a carrier table (ValueError, TypeError when wrong)."""
    kind = _SETTINGS.get(provider)
    if kind is None:
        names = ", ".join(repr(name) for name in _SETTINGS)
        raise ValueError(f"provider must be one of {names}")
    return kind(**options)


def http_carrier(settings: HttpSettings, *, clock: Clock = None) -> HttpCarrier:
    if isinstance(settings, TwilioSettings):
        return TwilioCarrier(settings, clock=clock)
    if isinstance(settings, TelnyxSettings):
        return telnyx_carrier(settings, clock=clock)
    if isinstance(settings, VonageSettings):
        return vonage_carrier(settings, clock=clock)
    raise TypeError(f"no carrier for {type(settings).__name__}")
