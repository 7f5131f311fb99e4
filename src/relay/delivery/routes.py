"""A send's route across channels, decided before anything is written.

A verification may ask for several channels in order; its route is each
channel's carriers one after the other (SMS: the destination country's route,
in the order measured figures give it now), with each carrier's channel beside
it, so failover walks from one channel to the next with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from relay.abuse.models import country_allowed
from relay.accounts.models import Caller
from relay.carriers.base import PHONE_CHANNELS, Channel
from relay.carriers.registry import CarrierSet
from relay.delivery.figures import MeasuredRoutes
from relay.errors import CountryNotAllowed, NoRouteAvailable, ParameterInvalid
from relay.phone import Destination, parse_destination
from relay.records import fast_init


@fast_init
@dataclass(frozen=True)
class Route:
    """Carrier names in failover order, and the channel of each."""

    carriers: tuple[str, ...]
    channels: tuple[Channel, ...]


async def route_for(
    carriers: CarrierSet,
    measured: MeasuredRoutes,
    caller: Caller,
    destination: Destination,
    channels: Sequence[Channel],
    *,
    param: str,
) -> Route:
    """The route of a send to `destination` on `channels`, or the 400 that refuses it.

    A phone destination must be in the account's allowed countries. Every channel
    asked for needs a carrier: a live key's channel without one is refused
    (`param`: `channel` or `channels`, as the request named them), SMS without a
    route for the country as `no_route_available`, as before channels.
    """
    if any(channel in PHONE_CHANNELS for channel in channels) and not country_allowed(
        destination.country, caller.allowed_countries
    ):
        raise CountryNotAllowed(param="to")
    names: list[str] = []
    kinds: list[Channel] = []
    for channel in channels:
        found = carriers.routes.for_channel(
            channel, livemode=caller.livemode, country=destination.country
        )
        if found is None:
            if channel == "sms":
                raise NoRouteAvailable()
            raise ParameterInvalid(
                f"No {channel} carrier is configured on this server; ask for another channel.",
                param=param,
            )
        if channel == "sms" and caller.livemode:
            ordered = await measured.order(destination.country, found)
            found = found if ordered is None else ordered.route
        names += found
        kinds += [channel] * len(found)
    return Route(tuple(names), tuple(kinds))


async def route_to(
    carriers: CarrierSet, measured: MeasuredRoutes, caller: Caller, to: str
) -> tuple[Destination, tuple[str, ...]]:
    """Where an SMS to `to` may go and through which carriers, refused before anything
    is written: country permissions and the route are checked before any row, carrier
    call or cost, so a live send with no route writes nothing. A measured route comes
    in the order the last hour's figures give it now."""
    destination = parse_destination(to, livemode=caller.livemode)
    if not country_allowed(destination.country, caller.allowed_countries):
        raise CountryNotAllowed(param="to")
    route = carriers.routes.for_send(livemode=caller.livemode, country=destination.country)
    if route is None:
        raise NoRouteAvailable()
    if caller.livemode:
        ordered = await measured.order(destination.country, route)
        route = route if ordered is None else ordered.route
    return destination, route
