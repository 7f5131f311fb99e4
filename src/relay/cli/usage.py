"""`relay usage`: live sends, billed segments and spend per account, day, country, carrier, outcome.

Spend is priced at print time from the configured `[carriers.NAME.prices]`
(the country's price, else the carrier's `default`): the counters keep
segments, which do not change when a price does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from decimal import Decimal
from typing import Any

from relay.delivery.usage import UsageRow, usage_rows
from relay.services import Services

Common = Callable[[argparse.ArgumentParser], None]
Prices = Mapping[str, Mapping[str, Decimal]]


def add_parser(commands: Any, common: Common) -> None:
    usage = commands.add_parser(
        "usage",
        help="print live sends, billed segments and spend per account, day, country, carrier"
        " and outcome",
    )
    common(usage)
    usage.add_argument("--account", help="only this account id")
    usage.add_argument("--since", help="first day to include, YYYY-MM-DD (UTC)")
    usage.add_argument("--json", action="store_true", help="one JSON object per row")


async def run(services: Services, args: argparse.Namespace) -> int:
    if args.since is not None and not _is_day(args.since):
        print("relay: --since takes a day, YYYY-MM-DD", file=sys.stderr)
        return 2
    rows = await services.db.read(
        lambda tx: usage_rows(tx, account_id=args.account, since=args.since)
    )
    prices = services.delivery.carriers.prices
    if args.json:
        for row in rows:
            print(json.dumps(_as_json(row, prices)))
        return 0
    header = ("account", "day", "country", "carrier", "outcome", "count", "segments", "spend")
    _print_table(header, [_cells(row, prices) for row in rows])
    print(
        f"{sum(r.count for r in rows)} live send attempt(s) counted; test keys are never counted."
    )
    if rows:
        print()
        _print_table(("carrier", "country", "count", "segments", "spend"), _totals(rows, prices))
    return 0


def _as_json(row: UsageRow, prices: Prices) -> dict[str, object]:
    spend = row.spend(prices)
    return {**dataclasses.asdict(row), "spend": None if spend is None else str(spend)}


def _cells(row: UsageRow, prices: Prices) -> tuple[str, ...]:
    fixed = (row.account_id, row.day, row.country, row.carrier, row.outcome)
    return (*fixed, str(row.count), str(row.segments), _shown(row.spend(prices)))


def _totals(rows: Sequence[UsageRow], prices: Prices) -> list[tuple[str, ...]]:
    """One line per carrier and country: every account, day and outcome added up."""
    sums: dict[tuple[str, str], tuple[int, int, Decimal | None]] = {}
    for row in rows:
        key = (row.carrier, row.country)
        count, segments, spend = sums.get(key, (0, 0, None))
        cost = row.spend(prices)
        if cost is not None:
            spend = cost if spend is None else spend + cost
        sums[key] = (count + row.count, segments + row.segments, spend)
    return [
        (carrier, country, str(count), str(segments), _shown(spend))
        for (carrier, country), (count, segments, spend) in sorted(sums.items())
    ]


def _shown(spend: Decimal | None) -> str:
    return "" if spend is None else str(spend)


def _print_table(header: tuple[str, ...], lines: Sequence[tuple[str, ...]]) -> None:
    table = [header, *lines]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        print("  ".join(cells).rstrip())


def _is_day(value: str) -> bool:
    try:
        return date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False
