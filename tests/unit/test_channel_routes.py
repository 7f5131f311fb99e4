"""Routes per channel: `[channel_routes]` parsed and checked against each carrier's channel."""

from __future__ import annotations

import re

import pytest

from relay.carriers import routing
from relay.carriers.base import Channel
from relay.carriers.registry import CarrierConfigError, build_carriers, carrier_problems
from relay.cli.checks import unsafe_for_live
from relay.config import Settings

CARRIERS: dict[str, Channel] = {
    "op": "sms",
    "meta": "whatsapp",
    "meta-2": "whatsapp",
    "mail": "email",
}


def test_each_channel_has_its_carriers_in_failover_order() -> None:
    table = routing.parse_routes(
        {"default": ["op"]}, CARRIERS, {"whatsapp": ["meta-2", "meta"], "email": ["mail"]}
    )
    assert table.for_channel("whatsapp", livemode=True, country="FR") == ("meta-2", "meta")
    assert table.for_channel("email", livemode=True, country="") == ("mail",)
    assert table.for_channel("sms", livemode=True, country="FR") == ("op",)


def test_a_live_channel_without_carriers_has_no_route() -> None:
    table = routing.parse_routes({"default": ["op"]}, CARRIERS)
    assert table.for_channel("whatsapp", livemode=True, country="FR") is None


@pytest.mark.parametrize(
    ("channel", "route"),
    [
        ("sms", ("sandbox", "sandbox-backup")),
        ("whatsapp", ("sandbox-whatsapp",)),
        ("email", ("sandbox-email",)),
    ],
)
def test_test_keys_use_each_channels_sandbox(channel: Channel, route: tuple[str, ...]) -> None:
    table = routing.parse_routes({}, CARRIERS, {"whatsapp": ["meta"]})
    assert table.for_channel(channel, livemode=False, country="US") == route


@pytest.mark.parametrize(
    ("routes", "channel_routes", "problem"),
    [
        (
            {"default": ["meta"]},
            {},
            "route 'default' takes sms carriers only, not: meta (whatsapp)",
        ),
        ({}, {"whatsapp": ["op"]}, "channel_routes.whatsapp takes whatsapp carriers only, not: op"),
        ({}, {"email": ["meta", "mail"]}, "channel_routes.email takes email carriers only"),
        ({}, {"whatsapp": ["nobody"]}, "channel_routes.whatsapp names unknown carriers: nobody"),
        ({}, {"whatsapp": ["meta", "meta"]}, "names a carrier twice"),
        ({}, {"whatsapp": []}, "give a non-empty list"),
        ({}, {"whatsapp": "meta"}, "give a non-empty list"),
        ({}, {"sms": ["op"]}, "SMS routes are the [routes] table"),
        ({}, {"fax": ["op"]}, "the channels are 'whatsapp' and 'email'"),
    ],
)
def test_a_route_naming_a_carrier_of_another_channel_or_nobody_is_refused(
    routes: dict[str, object], channel_routes: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        routing.parse_routes(routes, CARRIERS, channel_routes)


def test_a_sandbox_carrier_serves_the_channel_its_table_names() -> None:
    settings = Settings(
        carriers={"wa": {"kind": "sandbox", "channel": "whatsapp"}},
        channel_routes={"whatsapp": ["wa"]},
    )
    carriers = build_carriers(settings)
    assert carriers.carriers["wa"].channel == "whatsapp"
    assert carriers.channels()["sandbox-email"] == "email"
    assert carriers.routes.channels == {"whatsapp": ("wa",)}


def test_building_refuses_a_wrong_channel_and_the_check_reports_it() -> None:
    settings = Settings(
        carriers={"wa": {"kind": "sandbox", "channel": "whatsapp"}, "sms": {"kind": "sandbox"}},
        routes={"default": ["wa"]},
        channel_routes={"whatsapp": ["sms"], "email": ["sandbox-email"]},
    )
    with pytest.raises(CarrierConfigError, match="takes sms carriers only"):
        build_carriers(settings)
    problems = carrier_problems(settings)
    assert any("route 'default' takes sms carriers only, not: wa (whatsapp)" in p for p in problems)
    assert any("channel_routes.whatsapp takes whatsapp carriers only" in p for p in problems)
    assert len(problems) == 2, problems


def test_the_test_keys_sandbox_names_are_reserved() -> None:
    settings = Settings(carriers={"sandbox-whatsapp": {"kind": "sandbox"}})
    assert carrier_problems(settings) == [
        "carriers.sandbox-whatsapp: this name is reserved for test keys"
    ]


def test_a_sandbox_table_with_an_unknown_channel_is_refused() -> None:
    settings = Settings(carriers={"x": {"kind": "sandbox", "channel": "fax"}})
    assert carrier_problems(settings) == ["carriers.x.channel must be 'sms', 'whatsapp' or 'email'"]


def test_live_mode_refuses_a_channel_route_to_a_sandbox_carrier() -> None:
    settings = Settings(
        carriers={"wa": {"kind": "sandbox", "channel": "whatsapp"}},
        channel_routes={"whatsapp": ["wa"], "email": ["sandbox-email"]},
    )
    assert unsafe_for_live(settings)[:2] == [
        "channel_routes.whatsapp sends live messages to the sandbox carrier 'wa'",
        "channel_routes.email sends live messages to the sandbox carrier 'sandbox-email'",
    ]
