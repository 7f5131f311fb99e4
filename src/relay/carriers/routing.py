"""Routes and failover, pure: which carrier sends, and what happens after an answer.

A route is the ordered list of carriers for a destination country (or the
`default` route). Each try is one attempt at one position of that list. The
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
    CarrierError,
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
)
from relay.carriers.measured import Policy, parse_policy

DEFAULT_ROUTE = "default"

# Test keys always send through these two in-process carriers, so every
# failover path can be exercised without an SMS leaving the machine.
SANDBOX_ROUTE: tuple[str, ...] = ("sandbox", "sandbox-backup")

# The attempt error codes Relay itself assigns (carriers add their own codes,
# e.g. `smpp_0x00000045` or Twilio's numeric codes, under `carrier_code`).
CARRIER_REJECTED = "carrier_rejected"
CARRIER_UNAVAILABLE = "carrier_unavailable"
SMS_UNDELIVERABLE = "sms_undeliverable"
REPORT_TIMEOUT = "delivery_report_timeout"
CARRIER_NOT_CONFIGURED = "carrier_not_configured"
SEND_CANCELED = "send_canceled"

ERROR_MESSAGES: Mapping[str, str] = {
    CARRIER_REJECTED: "The carrier refused this SMS.",
    CARRIER_UNAVAILABLE: "The carrier could not be reached or was not bound.",
    SMS_UNDELIVERABLE: "The carrier reported that the SMS could not be delivered.",
    REPORT_TIMEOUT: "The carrier sent no delivery report in time.",
    CARRIER_NOT_CONFIGURED: "This carrier is no longer configured.",
    SEND_CANCELED: "The code expired or was closed before this SMS was sent.",
}


@dataclass(frozen=True)
class RouteTable:
    """Country (ISO 3166 alpha-2, upper case) or `default` → carrier names, in order."""

    routes: Mapping[str, tuple[str, ...]]
    # Routes with `strategy = "measured"`, by the same keys (relay.carriers.measured).
    measured: Mapping[str, Policy] = field(default_factory=dict)

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


def parse_routes(raw: Mapping[str, object], carriers: Sequence[str]) -> RouteTable:
    """Validate the `[routes]` table of the config file against the configured carriers."""
    known = set(carriers)
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
        routes[country] = names
        if policy is not None:
            measured[country] = policy
    return RouteTable(routes, measured)
