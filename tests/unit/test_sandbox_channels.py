"""The sandbox carriers of every channel and their magic destinations, in process."""

from __future__ import annotations

import pytest

from relay.carriers.base import CarrierRejected, CarrierUnavailable, Channel, OutboundSms
from relay.carriers.sandbox import SandboxCarrier


def message(to: str, *, fallback: bool = False) -> OutboundSms:
    return OutboundSms(
        attempt_id="att_1",
        to=to,
        sender="Acme",
        body="Your code is 123456",
        fallback_channel=fallback,
    )


def carrier(name: str, channel: Channel) -> SandboxCarrier:
    return SandboxCarrier(name, channel=channel)


@pytest.mark.parametrize(
    ("name", "channel", "to"),
    [
        ("sandbox-whatsapp", "whatsapp", "+15005550001"),
        ("sandbox-email", "email", "fails-first@example.com"),
        ("sandbox", "sms", "+15005550001"),
    ],
)
def test_the_first_carrier_of_a_channel_is_down_for_the_first_fails_destination(
    name: str, channel: Channel, to: str
) -> None:
    with pytest.raises(CarrierUnavailable):
        carrier(name, channel).submit_now(message(to))


def test_the_sms_backup_delivers_the_first_fails_number() -> None:
    receipt = carrier("sandbox-backup", "sms").submit_now(message("+15005550001"))
    assert receipt.final is not None
    assert receipt.final.status == "delivered"


@pytest.mark.parametrize("to", ["+15005550002", "UNDELIVERABLE@example.org"])
def test_undeliverable_destinations_are_accepted_then_reported_failed(to: str) -> None:
    receipt = carrier("sandbox-email" if "@" in to else "sandbox-whatsapp", "email").submit_now(
        message(to)
    )
    assert receipt.final is not None
    assert (receipt.final.status, receipt.final.error_code) == ("failed", "UNDELIV")


@pytest.mark.parametrize("fallback", [False, True])
def test_a_rejected_destination_is_refused_on_every_channel_even_as_a_fallback(
    fallback: bool,
) -> None:
    with pytest.raises(CarrierRejected):
        carrier("sandbox", "sms").submit_now(message("+15005550004", fallback=fallback))
    with pytest.raises(CarrierRejected):
        carrier("sandbox-email", "email").submit_now(
            message("rejected@x.example", fallback=fallback)
        )


@pytest.mark.parametrize("to", ["+15005550001", "+15005550002", "+15005550003"])
def test_a_fallback_channel_delivers_the_other_magic_numbers_at_once(to: str) -> None:
    receipt = carrier("sandbox", "sms").submit_now(message(to, fallback=True))
    assert receipt.final is not None
    assert receipt.final.status == "delivered"


def test_every_accepted_message_is_kept_with_its_channel_carrier() -> None:
    whatsapp = carrier("sandbox-whatsapp", "whatsapp")
    whatsapp.submit_now(message("+15005550006"))
    assert [m.to for m in whatsapp.sent] == ["+15005550006"]
    assert whatsapp.channel == "whatsapp"


def test_an_ordinary_address_whose_domain_looks_magic_is_delivered() -> None:
    receipt = carrier("sandbox-email", "email").submit_now(message("ada@rejected.example"))
    assert receipt.final is not None
    assert receipt.final.status == "delivered"
