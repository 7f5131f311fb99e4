"""Routes and failover rules, without a network or a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relay.carriers import routing
from relay.carriers.base import CarrierRejected, CarrierThrottled, CarrierUnavailable

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=10)
ROUTE = ("a", "b", "c")


def test_a_country_route_wins_over_the_default_route() -> None:
    table = routing.parse_routes({"FR": ["a", "b"], "default": ["c"]}, ["a", "b", "c"])
    assert table.for_country("FR") == ("a", "b")
    assert table.for_country("fr") == ("a", "b")
    assert table.for_country("DE") == ("c",)


def test_without_a_default_route_other_countries_have_no_route() -> None:
    table = routing.parse_routes({"FR": ["a"]}, ["a"])
    assert table.for_country("DE") is None
    assert table.for_send(livemode=True, country="DE") is None


def test_test_keys_always_use_the_two_sandbox_carriers() -> None:
    table = routing.parse_routes({"default": ["a"]}, ["a"])
    assert table.for_send(livemode=False, country="DE") == ("sandbox", "sandbox-backup")
    assert routing.RouteTable({}).for_send(livemode=False, country="US") == routing.SANDBOX_ROUTE


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"FR": ["nobody"]}, "unknown carriers: nobody"),
        ({"FRA": ["a"]}, "two-letter country code"),
        ({"FR": []}, "non-empty list"),
        ({"FR": "a"}, "non-empty list"),
        ({"FR": ["a", "a"]}, "names a carrier twice"),
    ],
)
def test_a_route_that_cannot_work_is_refused_at_startup(
    raw: dict[str, list[str]], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        routing.parse_routes(raw, ["a"])


def test_a_refused_submit_fails_over_to_the_next_carrier() -> None:
    decision = routing.after_submit_error(
        CarrierRejected("smpp_0x00000045", "no"), ROUTE, 0, now=NOW, expires_at=LATER
    )
    assert isinstance(decision, routing.Fail)
    assert decision.next_position == 1
    assert decision.error["code"] == "carrier_rejected"
    assert decision.error["carrier_code"] == "smpp_0x00000045"
    assert decision.error["doc_url"] == "/docs/errors#carrier_rejected"


def test_an_unreachable_carrier_fails_over_too() -> None:
    decision = routing.after_submit_error(
        CarrierUnavailable("smpp_not_bound", "down"), ROUTE, 1, now=NOW, expires_at=LATER
    )
    assert isinstance(decision, routing.Fail)
    assert decision.next_position == 2
    assert decision.error["code"] == "carrier_unavailable"


def test_throttling_waits_on_the_same_carrier_and_is_not_a_failure() -> None:
    decision = routing.after_submit_error(
        CarrierThrottled("smpp_0x00000058", "slow down", retry_after=1.5),
        ROUTE,
        0,
        now=NOW,
        expires_at=LATER,
    )
    assert decision == routing.Wait(until=NOW + timedelta(seconds=1.5))


def test_failover_stops_at_the_end_of_the_route() -> None:
    failure = routing.after_failure(
        routing.SMS_UNDELIVERABLE, ROUTE, 2, now=NOW, expires_at=LATER, carrier_code="UNDELIV"
    )
    assert failure.next_position is None
    assert failure.error["carrier_code"] == "UNDELIV"


def test_failover_stops_once_the_code_has_expired() -> None:
    failure = routing.after_failure(routing.REPORT_TIMEOUT, ROUTE, 0, now=LATER, expires_at=LATER)
    assert failure.next_position is None
    assert failure.error["code"] == "delivery_report_timeout"
