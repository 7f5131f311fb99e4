"""Routing by measured delivery, pure: the order of a route's carriers from the last
hour's figures, per send.

A carrier with at least `min_sample` final attempts in the window is measured:
ranked by delivery rate, then median receipt time, then configured price, then
its configured place. One below `min_delivery_rate` is demoted to the end. One
with fewer attempts keeps its configured place. A share `explore` of sends puts
a demoted carrier first, so that it is measured again and can come back.

The window is whole minutes, `[minute - 1 h, minute)` of `now`: every process
that reads the same rows in the same minute orders a route the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

WINDOW = timedelta(hours=1)
STRATEGIES = ("ordered", "measured")

Standing = Literal["ranked", "unmeasured", "demoted", "explored"]


@dataclass(frozen=True)
class Policy:
    """The settings of one measured route (`[routes.X]`)."""

    min_delivery_rate: float = 0.8
    min_sample: int = 20
    explore: float = 0.05


@dataclass(frozen=True)
class Figures:
    """One carrier in one country over the window."""

    final: int
    delivered: int
    # Whole seconds from an attempt's creation to its delivered receipt; None: none delivered.
    median_seconds: float | None
    # Shown to operators, not ranked by: the 95th percentile (nearest rank), and of the
    # delivered attempts of verifications, how many verifications were approved.
    p95_seconds: int | None = None
    verified: int = 0
    approved: int = 0

    @property
    def rate(self) -> Fraction:
        return Fraction(self.delivered, self.final) if self.final else Fraction(0)


@dataclass(frozen=True)
class Placed:
    carrier: str
    standing: Standing
    figures: Figures | None
    price: Decimal | None


@dataclass(frozen=True)
class Ordered:
    """A route in the order a send takes it, each carrier with why it stands there."""

    placed: tuple[Placed, ...]

    @property
    def route(self) -> tuple[str, ...]:
        return tuple(place.carrier for place in self.placed)


def window(now: datetime) -> tuple[datetime, datetime]:
    """The hour of attempts the figures cover at `now`: it ends at the start of the minute."""
    until = now.replace(second=0, microsecond=0)
    return until - WINDOW, until


def order(
    route: Sequence[str],
    figures: Mapping[str, Figures],
    prices: Mapping[str, Decimal],
    policy: Policy,
    *,
    draw: float,
) -> Ordered:
    """The route for one send; `draw` is uniform in [0, 1) and decides exploration."""

    def standing(carrier: str) -> Standing:
        found = figures.get(carrier)
        if found is None or found.final < policy.min_sample:
            return "unmeasured"
        below = found.rate < Fraction(str(policy.min_delivery_rate))
        return "demoted" if below else "ranked"

    def key(carrier: str) -> tuple[Any, ...]:
        found = figures[carrier]
        median, price = found.median_seconds, prices.get(carrier)
        return (-found.rate, median is None, median or 0, price is None, price or 0, index[carrier])

    index = {carrier: position for position, carrier in enumerate(route)}
    standings = {carrier: standing(carrier) for carrier in route}
    ranked = iter(sorted((c for c in route if standings[c] == "ranked"), key=key))
    kept = [
        next(ranked) if standings[c] == "ranked" else c for c in route if standings[c] != "demoted"
    ]
    demoted = sorted((c for c in route if standings[c] == "demoted"), key=key)
    if demoted and draw < policy.explore:
        chosen = demoted[min(int(draw / policy.explore * len(demoted)), len(demoted) - 1)]
        standings[chosen] = "explored"
        demoted.remove(chosen)
        kept.insert(0, chosen)
    return Ordered(
        tuple(Placed(c, standings[c], figures.get(c), prices.get(c)) for c in [*kept, *demoted])
    )


def median(histogram: Mapping[int, int]) -> float | None:
    """The median of whole seconds counted by value; the mean of the two middle ones if even."""
    total = sum(histogram.values())
    if total == 0:
        return None
    positions, found, seen = ((total - 1) // 2, total // 2), list[int](), 0
    for value in sorted(histogram):
        seen += histogram[value]
        while len(found) < 2 and positions[len(found)] < seen:
            found.append(value)
    return (found[0] + found[1]) / 2


def nearest_rank(histogram: Mapping[int, int], share: float) -> int | None:
    """The smallest value with at least `share` of the counted values at or below it."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank, seen = max(math.ceil(share * total), 1), 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value
    return None  # unreachable: seen reaches total >= rank


@dataclass(frozen=True)
class Tally:
    """One row of the figures query: final attempts of one carrier, country and outcome
    (`seconds` is set for delivered ones, rounded to whole seconds)."""

    carrier: str
    country: str
    delivered: bool
    seconds: int | None
    count: int
    # Delivered attempts of verifications in this row, and how many of those were approved.
    verified: int = 0
    approved: int = 0


def tally(rows: Iterable[Tally]) -> dict[tuple[str, str], Figures]:
    """(carrier, country) → its figures, from the query's grouped rows."""
    finals: dict[tuple[str, str], list[int]] = {}
    histograms: dict[tuple[str, str], dict[int, int]] = {}
    for row in rows:
        key = (row.carrier, row.country)
        counts = finals.setdefault(key, [0, 0, 0])
        counts[0] += row.count
        counts[1] += row.verified
        counts[2] += row.approved
        histogram = histograms.setdefault(key, {})
        if row.delivered:
            seconds = max(row.seconds or 0, 0)
            histogram[seconds] = histogram.get(seconds, 0) + row.count
    return {
        key: Figures(
            final,
            sum(histograms[key].values()),
            median(histograms[key]),
            nearest_rank(histograms[key], 0.95),
            verified,
            approved,
        )
        for key, (final, verified, approved) in finals.items()
    }


def parse_policy(key: str, table: Mapping[str, Any]) -> tuple[tuple[str, ...], Policy | None]:
    """A route given as a table: its carriers and, for `strategy = "measured"`, its policy."""
    options = dict(table)
    names = options.pop("carriers", None)
    strategy = options.pop("strategy", "ordered")
    if strategy not in STRATEGIES:
        raise ValueError(f"route {key!r}: strategy must be 'ordered' or 'measured'")
    if isinstance(names, str) or not isinstance(names, list | tuple) or not names:
        raise ValueError(f"route {key!r}: give carriers = a non-empty list of carrier names")
    rate = options.pop("min_delivery_rate", Policy.min_delivery_rate)
    sample = options.pop("min_sample", Policy.min_sample)
    explore = options.pop("explore", Policy.explore)
    if options:
        raise ValueError(f"route {key!r}: unknown settings {', '.join(sorted(options))}")
    if strategy == "ordered":
        if (rate, sample, explore) != (Policy.min_delivery_rate, Policy.min_sample, Policy.explore):
            raise ValueError(
                f"route {key!r}: min_delivery_rate, min_sample and explore"
                " need strategy = 'measured'"
            )
        return tuple(names), None
    _check_fraction(key, "min_delivery_rate", rate)
    _check_fraction(key, "explore", explore)
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ValueError(f"route {key!r}: min_sample must be a whole number of at least 1")
    return tuple(names), Policy(float(rate), sample, float(explore))


def _check_fraction(key: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"route {key!r}: {name} must be a number from 0 to 1")


def parse_prices(name: str, raw: object) -> dict[str, Decimal]:
    """`[carriers.NAME.prices]`: country (or `default`) → the price of one SMS part."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"carriers.{name}.prices must be a table of country = price")
    prices: dict[str, Decimal] = {}
    for key, value in raw.items():
        country = key if key == "default" else key.upper()
        if country != "default" and not (len(country) == 2 and country.isalpha()):
            raise ValueError(
                f"carriers.{name}.prices.{key}: use a two-letter country code or 'default'"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"carriers.{name}.prices.{key} must be a number of at least 0")
        prices[country] = Decimal(str(value))
    return prices


def price_in(prices: Mapping[str, Decimal], country: str) -> Decimal | None:
    return prices.get(country.upper(), prices.get("default"))
