"""Where a verification goes: its `to`, checked against the channels it asks for.

One verification has one destination, shared by all its channels: a phone
number (E.164) for `sms` and `whatsapp`, an email address for `email`. So a
list of channels never mixes `email` with a phone channel: one code is bound
to one destination, which a check by `to` and the one pending verification
per destination rely on. An email address counts as its mailbox
(`email_address.mailbox_of`): `Ada@x` and `ada+1@x` are one destination.
"""

from __future__ import annotations

from collections.abc import Sequence

from relay.carriers.base import PHONE_CHANNELS, Channel
from relay.email_address import mailbox_of, parse_email
from relay.errors import ParameterInvalid
from relay.phone import Destination, parse_destination

# An email address has no country: "" in storage, null in the API.
NO_COUNTRY = ""


def require_channels(channels: Sequence[Channel], *, param: str) -> tuple[Channel, ...]:
    """The list as asked: no repeats, and email never beside a phone channel."""
    if len(set(channels)) != len(channels):
        raise ParameterInvalid("channels may name each channel once.", param=param)
    if "email" in channels and any(channel in PHONE_CHANNELS for channel in channels):
        raise ParameterInvalid(
            "email cannot be combined with sms or whatsapp: a verification has one "
            "destination, an email address or a phone number.",
            param=param,
        )
    return tuple(channels)


def destination_for(to: str, channels: Sequence[Channel], *, livemode: bool) -> Destination:
    """`to` checked for the channels (already `require_channels`-checked).

    A phone number given to `email`, or an address given to a phone channel, is
    400 parameter_invalid on `to`; a malformed number keeps its own errors.
    """
    if "email" in channels:
        if "@" not in to:
            raise ParameterInvalid(
                "The email channel needs an email address in to, not a phone number.",
                param="to",
            )
        address = parse_email(to)
        return Destination(e164=address, country=NO_COUNTRY, mailbox=mailbox_of(address))
    if "@" in to:
        names = " and ".join(channels)
        raise ParameterInvalid(
            f"to is an email address, but {names} needs a phone number in E.164 form.",
            param="to",
        )
    return parse_destination(to, livemode=livemode)


def is_email(to: str) -> bool:
    return "@" in to
