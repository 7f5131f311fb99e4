"""Routes and failover, pure: which carrier sends, and what happens after an answer.

A route is the ordered list of carriers for a destination country (or the
`default` route) on SMS, or for a whole channel (`[channel_routes]`: WhatsApp,
email). A verification's route is its channels' routes one after the other,
in the order it asked for them, so failover walks on from the last carrier of
one channel to the first of the next. Each try is one attempt at one position of that list. The
rules below decide, from a carrier's answer, whether the same attempt waits
(throttling), whether the next carrier gets a new attempt (failover), or
whether the send is over. They take `now` and never touch a network or a
database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from relay.carriers.base import (
    CHANNELS,
    CarrierError,
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    Channel,
)
from relay.carriers.measured import Policy, parse_policy

DEFAULT_ROUTE = "default"

# Test keys always send through these in-process carriers, so every failover
# path can be exercised without a message leaving the machine.
SANDBOX_ROUTE: tuple[str, ...] = ("sandbox", "sandbox-backup")
SANDBOX_ROUTES: Mapping[Channel, tuple[str, ...]] = {
    "sms": SANDBOX_ROUTE,
    "whatsapp": ("sandbox-whatsapp",),
    "email": ("sandbox-email",),
}

# The attempt error codes Relay itself assigns (carriers add their own codes,
# e.g. `smpp_0x00000045` or Twilio's numeric codes, under `carrier_code`).
CARRIER_REJECTED = "carrier_rejected"
CARRIER_UNAVAILABLE = "carrier_unavailable"
SMS_UNDELIVERABLE = "sms_undeliverable"
REPORT_TIMEOUT = "delivery_report_timeout"
CARRIER_NOT_CONFIGURED = "carrier_not_configured"
SEND_CANCELED = "send_canceled"
SMS_TOO_LONG = "sms_too_long"

ERROR_MESSAGES: Mapping[str, str] = {
    CARRIER_REJECTED: "The carrier refused this message.",
    CARRIER_UNAVAILABLE: "The carrier could not be reached or was not bound.",
    # The code keeps its name on every channel: a failed WhatsApp message or bounced
    # email is `sms_undeliverable` too, so integrations match one code.
    SMS_UNDELIVERABLE: "The carrier reported that the message could not be delivered.",
    REPORT_TIMEOUT: "The carrier sent no delivery report in time.",
    CARRIER_NOT_CONFIGURED: "This carrier is no longer configured.",
    SEND_CANCELED: "The code expired or was closed before this message was sent.",
    SMS_TOO_LONG: "The SMS would take more segments than max_segments allows; it was not sent.",
}


@dataclass(frozen=True)
class RouteTable:
    """Country (ISO 3166 alpha-2, upper case) or `default` → carrier names, in order."""

    routes: Mapping[str, tuple[str, ...]]
    # Routes with `strategy = "measured"`, by the same keys (relay.carriers.measured).
    measured: Mapping[str, Policy] = field(default_factory=dict)
    # `[channel_routes]`: the carriers of each channel but SMS, in failover order.
    channels: Mapping[Channel, tuple[str, ...]] = field(default_factory=dict)

    def for_country(self, country: str) -> tuple[str, ...] | None:
        route = self.routes.get(country.upper()) or self.routes.get(DEFAULT_ROUTE)
        return route or None

    def policy_for(self, country: str) -> Policy | None:
        """The measured policy of the route a send to `country` takes, if it has one."""
        key = country.upper() if country.upper() in self.routes else DEFAULT_ROUTE
        return self.measured.get(key)

    def for_send(self, *, livemode: bool, country: str) -> tuple[str, ...] | None:
        """Live keys use the configured routes; test keys always the sandbox."""
        return self.for_country(country) if livemode else SANDBOX_ROUTE

    def for_channel(
        self, channel: Channel, *, livemode: bool, country: str
    ) -> tuple[str, ...] | None:
        """One channel's carriers for a send; None when a live key has none there."""
        if not livemode:
            return SANDBOX_ROUTES[channel]
        if channel == "sms":
            return self.for_country(country)
        return self.channels.get(channel) or None


@dataclass(frozen=True)
class Wait:
    """Throttled: keep this attempt queued and submit it again at `until`."""

    until: datetime


@dataclass(frozen=True)
class Fail:
    """This attempt failed with `error`; `next_position` is where failover goes, if anywhere."""

    error: dict[str, Any]
    next_position: int | None


def attempt_error(code: str, *, carrier_code: str | None = None, docs: str = "") -> dict[str, Any]:
    """An attempt's `error`, in the API's error shape plus the carrier's own code.

    `docs` is Relay's public base URL, when known, for `doc_url`.
    """
    return {
        "type": "carrier_error",
        "code": code,
        "message": ERROR_MESSAGES[code],
        "param": None,
        "doc_url": f"{docs}/docs/errors#{code}",
        "carrier_code": carrier_code,
    }


def next_position(
    route: Sequence[str], position: int, *, now: datetime, expires_at: datetime
) -> int | None:
    """The next carrier to try, or None: the route is exhausted or the code has expired."""
    following = position + 1
    if following >= len(route) or now >= expires_at:
        return None
    return following


def after_submit_error(
    error: CarrierError,
    route: Sequence[str],
    position: int,
    *,
    now: datetime,
    expires_at: datetime,
    docs: str = "",
) -> Wait | Fail:
    """A submit that raised: throttling waits on the same carrier, the rest fail over."""
    if isinstance(error, CarrierThrottled):
        return Wait(until=now + timedelta(seconds=max(error.retry_after, 0.0)))
    if isinstance(error, CarrierRejected):
        code = CARRIER_REJECTED
    elif isinstance(error, CarrierUnavailable):
        code = CARRIER_UNAVAILABLE
    else:
        code = CARRIER_UNAVAILABLE
    return Fail(
        error=attempt_error(code, carrier_code=error.code, docs=docs),
        next_position=next_position(route, position, now=now, expires_at=expires_at),
    )


def after_failure(
    code: str,
    route: Sequence[str],
    position: int,
    *,
    now: datetime,
    expires_at: datetime,
    carrier_code: str | None = None,
    docs: str = "",
) -> Fail:
    """A failed receipt, a missing receipt or an unknown carrier: fail over if possible."""
    return Fail(
        error=attempt_error(code, carrier_code=carrier_code, docs=docs),
        next_position=next_position(route, position, now=now, expires_at=expires_at),
    )


def route_carriers(key: str, value: object) -> tuple[tuple[str, ...], Policy | None]:
    """A `[routes]` entry: a list of carrier names, or a table with `carriers` and a strategy."""
    if isinstance(value, Mapping):
        return parse_policy(key, value)
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"route {key!r}: give a non-empty list of carrier names")
    return tuple(value), None


def parse_routes(
    raw: Mapping[str, object],
    carriers: Sequence[str] | Mapping[str, Channel],
    channel_routes: Mapping[str, object] | None = None,
) -> RouteTable:
    """Validate the `[routes]` and `[channel_routes]` tables of the config file against
    the configured carriers (given with their channels, each carrier's is checked)."""
    known = set(carriers)
    channels: Mapping[str, Channel] = carriers if isinstance(carriers, Mapping) else {}
    routes: dict[str, tuple[str, ...]] = {}
    measured: dict[str, Policy] = {}
    for key, value in raw.items():
        country = key if key == DEFAULT_ROUTE else key.upper()
        if country != DEFAULT_ROUTE and not (len(country) == 2 and country.isalpha()):
            raise ValueError(f"route {key!r}: use a two-letter country code or 'default'")
        names, policy = route_carriers(key, value)
        unknown = [name for name in names if name not in known]
        if unknown:
            raise ValueError(f"route {key!r} names unknown carriers: {', '.join(unknown)}")
        if len(set(names)) != len(names):
            raise ValueError(f"route {key!r} names a carrier twice")
        _require_channel(f"route {key!r}", names, "sms", channels)
        routes[country] = names
        if policy is not None:
            measured[country] = policy
    by_channel = parse_channel_routes(channel_routes or {}, channels)
    return RouteTable(routes, measured, by_channel)


def parse_channel_routes(
    raw: Mapping[str, object], carriers: Mapping[str, Channel]
) -> dict[Channel, tuple[str, ...]]:
    """`[channel_routes]`: `whatsapp = [...]`, `email = [...]`, carriers of that channel."""
    found: dict[Channel, tuple[str, ...]] = {}
    for key, value in raw.items():
        if key == "sms":
            raise ValueError("channel_routes.sms: SMS routes are the [routes] table, by country")
        channel = next((c for c in CHANNELS if c == key), None)
        if channel is None:
            raise ValueError(f"channel_routes.{key}: the channels are 'whatsapp' and 'email'")
        if isinstance(value, str) or not isinstance(value, Sequence) or not value:
            raise ValueError(f"channel_routes.{key}: give a non-empty list of carrier names")
        names = tuple(str(name) for name in value)
        unknown = [name for name in names if name not in carriers]
        if unknown:
            raise ValueError(f"channel_routes.{key} names unknown carriers: {', '.join(unknown)}")
        if len(set(names)) != len(names):
            raise ValueError(f"channel_routes.{key} names a carrier twice")
        _require_channel(f"channel_routes.{key}", names, channel, carriers)
        found[channel] = names
    return found


def _require_channel(
    where: str, names: Sequence[str], channel: Channel, carriers: Mapping[str, Channel]
) -> None:
    wrong = [name for name in names if carriers.get(name, channel) != channel]
    if wrong:
        shown = ", ".join(f"{name} ({carriers[name]})" for name in wrong)
        raise ValueError(f"{where} takes {channel} carriers only, not: {shown}")
