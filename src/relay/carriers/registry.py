"""Carriers and routes from the config file: `[carriers.NAME]`, `[routes]`, `[channel_routes]`.

    [carriers.operator-a]
    kind = "smpp"              # or "http" (provider = "twilio", ...), "whatsapp", "smtp", "sandbox"
    host = "smsc.example.net"
    port = 2775
    system_id = "relay"
    password = "secret"
    receipt_timeout = 60       # seconds without a receipt before failing over

    [routes]
    FR = ["operator-a", "operator-b"]
    default = ["operator-b"]

    [channel_routes]           # carriers of the other channels, in failover order
    whatsapp = ["meta"]
    email = ["mail"]

The sandbox carriers of test keys (`sandbox`, `sandbox-backup`, `sandbox-whatsapp`,
`sandbox-email`) always exist. Each carrier serves one channel (`Carrier.channel`);
a route naming a carrier of another channel is refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from relay.carriers.base import CHANNELS, Carrier, Channel, OutboundSms
from relay.carriers.http_carrier import HttpSettings
from relay.carriers.measured import parse_prices, price_in
from relay.carriers.providers import http_carrier, http_settings
from relay.carriers.routing import RouteTable, parse_routes, route_carriers
from relay.carriers.sandbox import PRIMARY, TEST_KEY_CARRIERS, SandboxCarrier
from relay.carriers.smpp import SmppCarrier, SmppSettings
from relay.carriers.smtp import SmtpCarrier, SmtpSettings
from relay.carriers.whatsapp import WhatsAppCarrier, WhatsAppSettings
from relay.config import Settings

# Sandbox receipts come at once, or after `sandbox_slow_delivery`: wait for
# those with room to spare before failing over.
SANDBOX_RECEIPT_MARGIN = 25.0


class CarrierConfigError(ValueError):
    """The config file's carriers or routes are wrong; the message says where."""


@dataclass
class CarrierSet:
    """Every carrier this process knows, by name, with its routes and receipt deadlines."""

    carriers: dict[str, Carrier]
    routes: RouteTable
    receipt_timeouts: dict[str, float]
    # Carriers that hold connections (SMPP binds): started only where SMS are dispatched.
    connected: frozenset[str]
    sandbox: SandboxCarrier
    # `[carriers.NAME.prices]`: carrier → country (or `default`) → price of one SMS part.
    prices: dict[str, dict[str, Decimal]]

    def prices_in(self, country: str) -> dict[str, Decimal]:
        """Carrier → its price in `country`, for the carriers that set one."""
        found = {name: price_in(table, country) for name, table in self.prices.items()}
        return {name: price for name, price in found.items() if price is not None}

    def receipt_timeout(self, name: str, default: float) -> float:
        return self.receipt_timeouts.get(name, default)

    def channels(self) -> dict[str, Channel]:
        """Every carrier's channel, by name."""
        return {name: carrier.channel for name, carrier in self.carriers.items()}


def build_carriers(
    settings: Settings, *, clock: Callable[[], datetime] | None = None
) -> CarrierSet:
    sent: deque[OutboundSms] = deque(maxlen=1000)
    slow = settings.sandbox_slow_delivery
    carriers: dict[str, Carrier] = {
        name: SandboxCarrier(name, channel=channel, sent=sent, slow_delivery=slow, clock=clock)
        for name, channel in TEST_KEY_CARRIERS.items()
    }
    primary = carriers[PRIMARY]
    assert isinstance(primary, SandboxCarrier)
    sandbox_timeout = slow + SANDBOX_RECEIPT_MARGIN
    timeouts = {name: sandbox_timeout for name in TEST_KEY_CARRIERS}
    connected: set[str] = set()
    prices: dict[str, dict[str, Decimal]] = {}
    for name, table in settings.carriers.items():
        if name in carriers:
            raise CarrierConfigError(f"carriers.{name}: this name is reserved for test keys")
        carrier, timeout = _build_one(name, table, settings, clock=clock, sent=sent)
        carriers[name] = carrier
        timeouts[name] = timeout
        prices[name] = _prices(name, table.get("prices", {}))
        if isinstance(carrier, SmppCarrier):
            connected.add(name)
    channels = {name: carrier.channel for name, carrier in carriers.items()}
    try:
        routes = parse_routes(settings.routes, channels, settings.channel_routes)
    except ValueError as exc:
        raise CarrierConfigError(f"routes: {exc}") from exc
    return CarrierSet(carriers, routes, timeouts, frozenset(connected), primary, prices)


def _prices(name: str, raw: object) -> dict[str, Decimal]:
    try:
        return parse_prices(name, raw)
    except ValueError as exc:
        raise CarrierConfigError(str(exc)) from exc


def _build_one(
    name: str,
    table: Mapping[str, Any],
    settings: Settings,
    *,
    clock: Callable[[], datetime] | None,
    sent: deque[OutboundSms],
) -> tuple[Carrier, float]:
    spec, timeout = _spec(name, table, settings)
    if isinstance(spec, SmppSettings):
        return SmppCarrier(spec, clock=clock), timeout
    if isinstance(spec, WhatsAppSettings):
        return WhatsAppCarrier(spec, clock=clock), timeout
    if isinstance(spec, HttpSettings):
        return http_carrier(spec, clock=clock), timeout
    if isinstance(spec, SmtpSettings):
        return SmtpCarrier(spec, clock=clock), timeout
    slow = settings.sandbox_slow_delivery
    channel = sandbox_channel(name, table)
    return SandboxCarrier(
        name, channel=channel, sent=sent, slow_delivery=slow, clock=clock
    ), timeout


def sandbox_channel(name: str, table: Mapping[str, Any]) -> Channel:
    """A `kind = "sandbox"` table's `channel` (SMS unless it says otherwise)."""
    found = table.get("channel", "sms")
    channel = next((c for c in CHANNELS if c == found), None)
    if channel is None:
        raise CarrierConfigError(f"carriers.{name}.channel must be 'sms', 'whatsapp' or 'email'")
    return channel


def _spec(
    name: str, table: Mapping[str, Any], settings: Settings
) -> tuple[SmppSettings | HttpSettings | SmtpSettings | None, float]:
    """A carrier table checked and turned into its settings (None: a sandbox), and its
    receipt timeout; nothing is connected or opened."""
    options = dict(table)
    kind = options.pop("kind", None)
    if "prices" in options:
        _prices(name, options.pop("prices"))
    timeout = float(options.pop("receipt_timeout", settings.receipt_timeout))
    if timeout <= 0:
        raise CarrierConfigError(f"carriers.{name}.receipt_timeout must be positive")
    try:
        if kind == "smpp":
            if "reconnect_backoff" in options:
                options["reconnect_backoff"] = tuple(options["reconnect_backoff"])
            return SmppSettings(name=name, **options), timeout
        if kind == "http":
            provider = options.pop("provider", "twilio")
            options.setdefault("status_callback_url", _callback_url(name, settings))
            return http_settings(str(provider), name=name, **options), timeout
        if kind == "smtp":
            return _smtp_settings(name, options), timeout
        if kind == "whatsapp":
            # The Callback URL to type in Meta's App Dashboard; Meta is not told per message.
            options.setdefault("status_callback_url", _callback_url(name, settings))
            return WhatsAppSettings(name=name, **options), timeout
        if kind == "sandbox":
            sandbox_channel(name, options)
            return None, timeout
    except TypeError as exc:
        raise CarrierConfigError(f"carriers.{name}: {exc}") from exc
    except ValueError as exc:
        if isinstance(exc, CarrierConfigError):
            raise
        raise CarrierConfigError(f"carriers.{name}: {exc}") from exc
    raise CarrierConfigError(
        f"carriers.{name}.kind must be 'smpp', 'http', 'whatsapp', 'smtp' or 'sandbox'"
    )


def _smtp_settings(name: str, options: dict[str, Any]) -> SmtpSettings:
    # `from` is the address's name in the file, a keyword in Python.
    if "sender" in options:
        raise CarrierConfigError(f"carriers.{name}.sender: no such setting (the address is `from`)")
    if "from" not in options:
        raise CarrierConfigError(f"carriers.{name}.from is required (the sender's address)")
    options["sender"] = options.pop("from")
    return SmtpSettings(name=name, **options)


def carrier_problems(settings: Settings) -> list[str]:
    """Every mistake in the carriers and routes tables at once, without opening anything."""
    problems: list[str] = []
    known: dict[str, Channel] = dict(TEST_KEY_CARRIERS)
    for name, table in settings.carriers.items():
        if name in TEST_KEY_CARRIERS:
            problems.append(f"carriers.{name}: this name is reserved for test keys")
            continue
        try:
            _spec(name, table, settings)
        except CarrierConfigError as exc:
            problems.append(str(exc))
        # A route is checked against every named carrier, even one whose table is
        # wrong: that mistake is already reported once.
        known[name] = carrier_channel(table)
    for key, value in settings.routes.items():
        try:
            parse_routes({key: value}, known)
        except ValueError as exc:
            problems.append(f"routes: {exc}")
    for key, value in settings.channel_routes.items():
        try:
            parse_routes({}, known, {key: value})
        except ValueError as exc:
            problems.append(f"routes: {exc}")
    return problems


def carrier_channel(table: Mapping[str, Any]) -> Channel:
    """The channel a carrier table's kind serves, without building it (SMS when unsure)."""
    kind = table.get("kind")
    if kind == "sandbox":
        found = table.get("channel", "sms")
        return next((c for c in CHANNELS if c == found), "sms")
    return _KIND_CHANNELS.get(str(kind), "sms")


# Kinds of carrier that serve another channel than SMS, by `kind`.
_KIND_CHANNELS: dict[str, Channel] = {"whatsapp": "whatsapp", "smtp": "email"}


def route_names(key: str, value: object) -> tuple[str, ...]:
    """The carriers a `[routes]` entry names; none when the entry is malformed (reported
    by `carrier_problems`)."""
    try:
        return route_carriers(key, value)[0]
    except ValueError:
        return ()


def sandbox_carriers(settings: Settings) -> set[str]:
    """Carrier names that never send anything: the test keys' own and any `kind = "sandbox"`."""
    named = {name for name, table in settings.carriers.items() if table.get("kind") == "sandbox"}
    return named | set(TEST_KEY_CARRIERS)


# A secret in the callback URL is all that proves an unsigned callback: long enough
# that guessing it is hopeless (24 random characters are over 140 bits).
MIN_CALLBACK_SECRET = 24


def live_carrier_problems(settings: Settings) -> list[str]:
    """What a carrier table may hold on a developer's machine (a fake provider on
    http://127.0.0.1, a short secret) but not where it carries live traffic: a provider
    reached, or a callback URL holding its secret, over plain HTTP, and a short
    `callback_secret`. Tables that are wrong are left to `carrier_problems`."""
    problems: list[str] = []
    for name, table in settings.carriers.items():
        try:
            spec, _ = _spec(name, table, settings)
        except CarrierConfigError:
            continue
        if not isinstance(spec, HttpSettings):
            continue
        if not _is_https(spec.base_url):
            problems.append(
                f"carriers.{name}.base_url {spec.base_url!r} is not https://: credentials"
                " and codes would cross the network in clear text"
            )
        secret = getattr(spec, "callback_secret", None)
        if isinstance(secret, str) and secret and len(secret) < MIN_CALLBACK_SECRET:
            problems.append(
                f"carriers.{name}.callback_secret is shorter than {MIN_CALLBACK_SECRET}"
                " characters; use a random one"
            )
        # A provider that signs its callbacks is given the URL without the secret.
        in_url = bool(secret) and not getattr(spec, "signature_secret", None)
        if in_url and not _is_https(spec.status_callback_url):
            problems.append(
                f"carriers.{name}.status_callback_url is not https://: the callback_secret"
                " in it would cross the network in clear text"
            )
    return problems


def _is_https(url: str) -> bool:
    return urlsplit(url).scheme.lower() == "https"


def _callback_url(name: str, settings: Settings) -> str:
    """Where the provider posts status callbacks: Relay's own route for this carrier."""
    if not settings.public_url:
        raise CarrierConfigError(
            f"carriers.{name}: set status_callback_url, or public_url for Relay's address"
        )
    return f"{settings.public_url.rstrip('/')}/v1/carriers/{name}/status"
