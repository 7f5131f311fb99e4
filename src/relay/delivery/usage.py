"""Usage counters: one row per account, day, country, carrier and outcome of live sends.

Each row counts the sends and sums the segments their carriers bill, so spend
is segments times price. An attempt carries segments only once a carrier accepted
it (`relay.delivery.store.record_sent`): a refused or unreachable submit adds
its count and no segment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from relay.carriers.measured import price_in
from relay.db.sql import Sql, Tx

# One statement counts the send and adds the segments its attempt was billed,
# read from the attempt's row (written earlier in the same transaction): there
# is no read-then-write for concurrent writers of one counter to interleave.
# The WHERE also settles SQLite's parse of an upsert after a SELECT.
_COUNT = Sql(
    "INSERT INTO usage (account_id, day, country, carrier, outcome, count, segments)"
    " SELECT :account_id, :day, :country, :carrier, :outcome, 1, COALESCE(segments, 0)"
    " FROM attempts WHERE id = :attempt_id"
    " ON CONFLICT (account_id, day, country, carrier, outcome)"
    " DO UPDATE SET count = usage.count + 1, segments = usage.segments + excluded.segments"
)
_ROWS = (
    "SELECT account_id, day, country, carrier, outcome, count, segments FROM usage"
    " WHERE ({account} IS NULL OR account_id = {account})"
    " AND ({since} IS NULL OR day >= {since})"
    " ORDER BY account_id, day, country, carrier, outcome"
)
_USAGE_ROWS = Sql(
    _ROWS.format(account=":account", since=":since"),
    # A parameter only compared with NULL has no type PostgreSQL can infer.
    postgres=_ROWS.format(account="CAST(:account AS text)", since="CAST(:since AS text)"),
)
_TOTALS = Sql(
    "SELECT outcome, sum(count) AS total FROM usage WHERE account_id = :account GROUP BY outcome"
)


async def count(
    tx: Tx,
    *,
    attempt_id: str,
    account_id: str,
    day: str,
    country: str,
    carrier: str,
    outcome: str,
) -> None:
    """One more live send with this outcome, and its billed segments: a single upsert."""
    key = {
        "attempt_id": attempt_id,
        "account_id": account_id,
        "day": day,
        "country": country,
        "carrier": carrier,
        "outcome": outcome,
    }
    await tx.execute(_COUNT, key)


@dataclass(frozen=True)
class UsageRow:
    account_id: str
    day: str
    country: str
    carrier: str
    outcome: str
    count: int
    segments: int

    def spend(self, prices: Mapping[str, Mapping[str, Decimal]]) -> Decimal | None:
        """Segments times this carrier's price in this country (or its `default`); None unpriced."""
        price = price_in(prices.get(self.carrier, {}), self.country)
        return None if price is None else price * self.segments


async def usage_rows(
    tx: Tx, *, account_id: str | None = None, since: str | None = None
) -> list[UsageRow]:
    rows = await tx.fetch(_USAGE_ROWS, {"account": account_id, "since": since})
    return [
        UsageRow(
            r["account_id"],
            r["day"],
            r["country"],
            r["carrier"],
            r["outcome"],
            int(r["count"]),
            int(r["segments"]),
        )
        for r in rows
    ]


async def usage_totals(tx: Tx, *, account_id: str) -> dict[str, int]:
    """Outcome → count, all days: for tests and the usage summary line."""
    rows = await tx.fetch(_TOTALS, {"account": account_id})
    return {r["outcome"]: int(r["total"]) for r in rows}
