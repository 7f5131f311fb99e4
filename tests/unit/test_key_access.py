"""Whether a found key answers, decided on its row alone."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta

import pytest

from relay.accounts.access import FoundKey, check_overlap, parse_networks, refusal
from relay.accounts.models import Caller
from relay.errors import InvalidRequest

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
CALLER = Caller("acct_1", "Acme", None, livemode=False, key_id="key_1")


def found(**changes: object) -> FoundKey:
    values: dict[str, object] = {"revoked_at": None, "expires_at": None, "networks": None}
    values.update(changes)
    return FoundKey(caller=CALLER, **values)  # type: ignore[arg-type]


def at(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def test_an_unrestricted_active_key_answers_from_anywhere() -> None:
    assert refusal(found(), now=NOW, client=at("203.0.113.9")) is None


def test_a_revoked_key_is_refused_even_while_rolling() -> None:
    key = found(revoked_at=NOW, expires_at=NOW + timedelta(hours=1))
    assert refusal(key, now=NOW, client=None) == "revoked"


def test_a_rolling_key_answers_until_its_end_and_not_at_it() -> None:
    key = found(expires_at=NOW + timedelta(seconds=1))
    assert refusal(key, now=NOW, client=None) is None
    assert refusal(key, now=NOW + timedelta(seconds=1), client=None) == "expired after roll"


def test_a_restricted_key_answers_inside_its_ranges_in_either_family() -> None:
    key = found(networks=("10.0.0.0/8", "2001:db8::/32"))
    assert refusal(key, now=NOW, client=at("10.4.5.6")) is None
    assert refusal(key, now=NOW, client=at("2001:db8::1")) is None
    assert refusal(key, now=NOW, client=at("::ffff:10.4.5.6")) is None


def test_a_restricted_key_says_which_address_was_outside_which_ranges() -> None:
    key = found(networks=("10.0.0.0/8",))
    assert refusal(key, now=NOW, client=at("203.0.113.9")) == (
        "address 203.0.113.9 outside 10.0.0.0/8"
    )


def test_a_restricted_key_without_a_known_client_address_is_refused() -> None:
    assert refusal(found(networks=("10.0.0.0/8",)), now=NOW, client=None) is not None


def test_any_lifts_a_restriction_and_a_bare_address_is_its_own_range() -> None:
    assert parse_networks("any") is None
    assert parse_networks(" 203.0.113.9 , 10.0.0.0/8") == (
        ipaddress.ip_network("203.0.113.9/32"),
        ipaddress.ip_network("10.0.0.0/8"),
    )


def test_an_overlap_is_between_zero_and_a_day() -> None:
    assert check_overlap(0) == 0
    assert check_overlap(86400) == 86400
    with pytest.raises(InvalidRequest):
        check_overlap(86400.5)
