"""Measured routes, pure: the order of a route from the last hour's figures."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from relay.carriers import measured, routing
from relay.carriers.measured import Figures, Policy, Tally

POLICY = Policy(min_delivery_rate=0.8, min_sample=20, explore=0.05)
NO_EXPLORE = 0.99


def delivering(final: int, delivered: int, median: float | None = 5.0) -> Figures:
    return Figures(final=final, delivered=delivered, median_seconds=median)


def order(
    figures: dict[str, Figures],
    prices: dict[str, Decimal] | None = None,
    *,
    draw: float = NO_EXPLORE,
    route: tuple[str, ...] = ("a", "b", "c"),
) -> tuple[str, ...]:
    return measured.order(route, figures, prices or {}, POLICY, draw=draw).route


def test_the_better_delivery_rate_goes_first() -> None:
    assert order({"a": delivering(40, 33), "b": delivering(40, 39), "c": delivering(40, 36)}) == (
        "b",
        "c",
        "a",
    )


def test_at_the_same_rate_the_faster_median_receipt_goes_first() -> None:
    figures = {"a": delivering(20, 20, 9.0), "b": delivering(20, 20, 2.0)}
    assert order(figures, route=("a", "b")) == ("b", "a")


def test_at_the_same_rate_and_median_the_cheaper_price_goes_first_and_unpriced_last() -> None:
    figures = {c: delivering(20, 20, 3.0) for c in ("a", "b", "c")}
    prices = {"b": Decimal("0.05"), "c": Decimal("0.04")}
    assert order(figures, prices) == ("c", "b", "a")


def test_a_full_tie_keeps_the_configured_order() -> None:
    figures = {c: delivering(20, 19, 3.0) for c in ("a", "b", "c")}
    assert order(figures) == ("a", "b", "c")


def test_a_carrier_below_the_minimum_rate_goes_last() -> None:
    figures = {"a": delivering(20, 15), "b": delivering(20, 20), "c": delivering(20, 19)}
    placed = measured.order(("a", "b", "c"), figures, {}, POLICY, draw=NO_EXPLORE).placed
    assert [(p.carrier, p.standing) for p in placed] == [
        ("b", "ranked"),
        ("c", "ranked"),
        ("a", "demoted"),
    ]


def test_a_carrier_with_too_few_attempts_keeps_its_configured_place() -> None:
    """`b` has failed every time, but only 19 times: it stays second."""
    figures = {"a": delivering(20, 17), "b": delivering(19, 0, None), "c": delivering(20, 20)}
    assert order(figures) == ("c", "b", "a")
    assert order({}) == ("a", "b", "c")


def test_a_draw_below_explore_puts_a_demoted_carrier_first() -> None:
    figures = {"a": delivering(20, 1), "b": delivering(20, 20), "c": delivering(20, 2)}
    assert order(figures, draw=0.05) == ("b", "c", "a")
    assert order(figures, draw=0.0) == ("c", "b", "a")
    assert order(figures, draw=0.049) == ("a", "b", "c")
    placed = measured.order(("a", "b", "c"), figures, {}, POLICY, draw=0.0).placed
    assert placed[0].standing == "explored"


def test_without_a_demoted_carrier_no_send_explores() -> None:
    assert order({"a": delivering(20, 20)}, draw=0.0) == ("a", "b", "c")


def test_the_window_is_the_hour_before_the_current_minute() -> None:
    since, until = measured.window(datetime(2026, 11, 26, 9, 41, 37, 5, tzinfo=UTC))
    assert until == datetime(2026, 11, 26, 9, 41, tzinfo=UTC)
    assert since == datetime(2026, 11, 26, 8, 41, tzinfo=UTC)


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert measured.median({1: 1, 3: 1}) == 2.0
    assert measured.median({1: 2, 9: 1}) == 1.0
    assert measured.median({}) is None


def test_the_tally_counts_every_final_attempt_and_times_only_delivered_ones() -> None:
    rows = [
        Tally("a", "FR", True, 2, 3, verified=2, approved=1),
        Tally("a", "FR", True, 7, 2),
        Tally("a", "FR", False, None, 5),
        Tally("a", "DE", False, None, 1),
    ]
    assert measured.tally(rows) == {
        ("a", "FR"): Figures(10, 5, median_seconds=2.0, p95_seconds=7, verified=2, approved=1),
        ("a", "DE"): Figures(final=1, delivered=0, median_seconds=None),
    }


def test_the_95th_percentile_is_the_nearest_rank() -> None:
    assert measured.nearest_rank({1: 95, 30: 5}, 0.95) == 1
    assert measured.nearest_rank({1: 94, 30: 6}, 0.95) == 30
    assert measured.nearest_rank({}, 0.95) is None


def test_a_route_table_says_measured_with_its_own_settings() -> None:
    table = routing.parse_routes(
        {
            "FR": {"carriers": ["a", "b"], "strategy": "measured", "min_sample": 5},
            "default": ["b"],
        },
        ["a", "b"],
    )
    assert table.for_country("FR") == ("a", "b")
    assert table.policy_for("fr") == Policy(min_delivery_rate=0.8, min_sample=5, explore=0.05)
    assert table.policy_for("DE") is None


def test_the_default_route_may_be_measured() -> None:
    table = routing.parse_routes({"default": {"carriers": ["a"], "strategy": "measured"}}, ["a"])
    assert table.policy_for("JP") == Policy()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"carriers": ["a"], "strategy": "cheapest"}, "strategy must be"),
        ({"strategy": "measured"}, "give carriers ="),
        ({"carriers": ["a"], "strategy": "measured", "explore": 2}, "explore must be"),
        ({"carriers": ["a"], "strategy": "measured", "min_sample": 0}, "min_sample must be"),
        ({"carriers": ["a"], "min_sample": 5}, "need strategy = 'measured'"),
        ({"carriers": ["a"], "strategy": "measured", "explor": 0.1}, "unknown settings explor"),
    ],
)
def test_a_wrong_route_table_is_refused_with_where(value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        routing.parse_routes({"FR": value}, ["a"])


def test_prices_are_per_country_with_a_default() -> None:
    prices = measured.parse_prices("a", {"fr": 0.045, "default": 0.07})
    assert measured.price_in(prices, "FR") == Decimal("0.045")
    assert measured.price_in(prices, "DE") == Decimal("0.07")
    with pytest.raises(ValueError, match="must be a number of at least 0"):
        measured.parse_prices("a", {"FR": -1})
